"""What a browser waits for on each chart page: Chromium's navigation timing, plotly's bundle before and after.

    make bench                                   # once: the bench database
    make static-compressed                       # the gzip WhiteNoise serves beside the bundle
    .venv/bin/python -m bench.browser_pages --rounds 5 --port 8054

Serves the dashboard on the bench database from this process (Django's threaded WSGI server, WhiteNoise
serving the static files as under ``make run``) and opens each chart page (overview, injection, node,
batch, impact) in headless Chromium as the bench graph's admin, alternating the two variants round by round:

- ``after``: the pages as they are (plotly.js's cartesian bundle, 1.5 MB, gzip beside it, cached a year);
- ``before``: the same pages with the full bundle the review measured (the plotly package's
  ``plotly/plotly.min.js``, 4.8 MB, no gzip) served with ``Cache-Control: max-age=0`` as WhiteNoise did
  under ``DEBUG`` (the script tag rewritten in the page by a WSGI wrapper; nothing else differs).

Per page and variant: a cold load (a new browser context: empty cache) and a warm load (the same page again
in that context), each the navigation's ``loadEventEnd`` (from the request's start to the end of the load
event, plotly's drawing included: the pages draw on load) and the bytes transferred (navigation plus
resources, ``transferSize``). Prints the medians; writes nothing.
"""

from __future__ import annotations

import argparse
import statistics
import threading
from http.cookies import SimpleCookie

from bench.common import setup_django

AFTER_JS = "vendor/plotly/plotly-basic-4.1.1.min.js"
BEFORE_JS = "plotly/plotly.min.js"

TIMING = """() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  return {
    load: nav.loadEventEnd - nav.startTime,
    dcl: nav.domContentLoadedEventEnd - nav.startTime,
    bytes: nav.transferSize + resources.reduce((s, r) => s + (r.transferSize || 0), 0),
  };
}"""


def before_variant(app):
    """A WSGI wrapper: with the cookie ``variant=before``, pages load the full bundle and that file is
    served with ``max-age=0`` (the review's state); otherwise the application as it is."""

    def wrapped(environ, start_response):
        cookie = SimpleCookie(environ.get("HTTP_COOKIE", ""))
        before = "variant" in cookie and cookie["variant"].value == "before"
        path = environ.get("PATH_INFO", "")
        if not before:
            return app(environ, start_response)
        captured = {}

        def capture(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers
            return lambda data: None

        result = app(environ, capture)
        try:
            body = b"".join(result)
        finally:
            if hasattr(result, "close"):
                result.close()  # Django's request_finished: the request's database connection is closed
        headers = captured["headers"]
        if path.endswith("/" + BEFORE_JS):
            headers = [(k, v) for k, v in headers if k.lower() != "cache-control"] + [("Cache-Control", "max-age=0")]
        elif any(k.lower() == "content-type" and v.startswith("text/html") for k, v in headers):
            body = body.replace(AFTER_JS.encode(), BEFORE_JS.encode())
            headers = [(k, str(len(body)) if k.lower() == "content-length" else v) for k, v in headers]
        start_response(captured["status"], headers)
        return [body]

    return wrapped


def serve(port: int):
    from django import db
    from django.core.handlers.wsgi import WSGIHandler
    from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    httpd = ThreadedWSGIServer(("127.0.0.1", port), Quiet)
    app = before_variant(WSGIHandler())

    def fresh_connections(environ, start_response):
        # Each request on a connection of its own (a keep-alive thread serves several; the bench database's
        # idle timeouts must not meet one left open between them).
        db.connections.close_all()
        return app(environ, start_response)

    httpd.set_app(fresh_connections)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def samples():
    from django.contrib.auth import get_user_model
    from django.db.models import Count
    from django.test import Client
    from django.urls import reverse

    from feedback.models import ContextInjection, UpdateBatch
    from graphadmin.models import Graph, Membership, Node

    graph = Graph.objects.filter(organization__slug="bench").order_by("pk").first()
    if graph is None:
        raise SystemExit("No bench graph: run `make bench` first.")
    user, _ = get_user_model().objects.get_or_create(username="bench-admin")
    Membership.objects.update_or_create(user=user, organization=graph.organization, defaults={"role": "admin"})
    client = Client()
    client.force_login(user)
    g = graph.pk
    hub = (
        Node.objects.filter(graph=graph, archived=False)
        .annotate(n=Count("out_edges"))
        .order_by("-n")
        .values_list("pk", flat=True)
        .first()
    )
    injection = ContextInjection.objects.filter(graph=graph).order_by("-id").values_list("pk", flat=True).first()
    batch = UpdateBatch.objects.filter(graph=graph, kind="outcome").order_by("-id").values_list("pk", flat=True)[0]
    pages = {
        "overview": reverse("overview", args=[g]),
        "injection": reverse("injection", args=[g, injection]),
        "node": reverse("node", args=[g, hub]),
        "batch": reverse("batch", args=[g, batch]),
        "impact": reverse("impact", args=[g]),
    }
    return pages, client.cookies["sessionid"].value


def measure(browser, base: str, url: str, session: str, variant: str) -> dict:
    context = browser.new_context(viewport={"width": 1440, "height": 900})
    context.add_cookies(
        [
            {"name": "sessionid", "value": session, "url": base},
            {"name": "variant", "value": variant, "url": base},
        ]
    )
    page = context.new_page()
    out = {}
    for load in ("cold", "warm"):
        response = page.goto(base + url, wait_until="load")
        assert response.status == 200, (url, response.status)
        page.wait_for_selector("div.chart svg.main-svg", timeout=60000)
        out[load] = page.evaluate(TIMING)
    context.close()
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="Loads per page and variant (alternating).")
    parser.add_argument("--port", type=int, default=8054)
    args = parser.parse_args(argv)
    setup_django()
    from django.urls import reverse  # noqa: F401 - URLconf loaded before the server's threads

    pages, session = samples()
    httpd = serve(args.port)
    base = f"http://127.0.0.1:{args.port}"
    from tests.browser import chromium

    results = {(name, v): [] for name in pages for v in ("before", "after")}
    try:
        with chromium() as browser:
            for url in pages.values():  # a first load of each page, not counted (server-side warm-up)
                measure(browser, base, url, session, "after")
            for r in range(args.rounds):
                for name, url in pages.items():
                    for variant in ("before", "after") if r % 2 == 0 else ("after", "before"):
                        results[(name, variant)].append(measure(browser, base, url, session, variant))
    finally:
        httpd.shutdown()
    print(f"{args.rounds} rounds, medians")
    print("| page | variant | cold load (ms) | cold bytes | warm load (ms) | warm bytes |")
    print("|---|---|---:|---:|---:|---:|")
    for (name, variant), rows in results.items():

        def med(load, key, rows=rows):
            return statistics.median(row[load][key] for row in rows)

        print(
            f"| {name} | {variant} | {med('cold', 'load'):,.0f} | {med('cold', 'bytes'):,.0f} | "
            f"{med('warm', 'load'):,.0f} | {med('warm', 'bytes'):,.0f} |"
        )


if __name__ == "__main__":
    main()
