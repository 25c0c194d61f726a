"""Screenshots of every dashboard page on the demo graph with its simulated weeks of history (what `make run`
opens on), taken in headless Chromium into docs/screenshots/.

They are what the README and docs/dashboard.md show; the test also checks each page answered 200 and drew its
charts and graph views.
"""

from pathlib import Path

import pytest

from feedback.harness.demo import ensure_demo, fill_demo_history
from feedback.models import AgentSession, ContextInjection, UpdateBatch, WeightChange
from graphadmin.models import Edge, Node
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def test_screenshots_of_every_page(live_server, monkeypatch):
    monkeypatch.setenv("DEMO_PASSWORD", "demo-screenshots")
    graph, password = ensure_demo()
    assert fill_demo_history()["status"] == "filled"
    g = graph.pk
    injection = ContextInjection.objects.filter(graph=graph).order_by("-created_at").first()
    batch = UpdateBatch.objects.filter(graph=graph, kind="reinforce").order_by("-started_at").first()
    session = AgentSession.objects.filter(graph=graph, outcome="accepted").order_by("-started_at").first()
    # An edge with weight history (moved by path credit or an outcome), so its page has a chart.
    edge = Edge.objects.filter(
        graph=graph, pk__in=WeightChange.objects.filter(graph=graph, edge__isnull=False).values("edge_id")
    ).first()
    note = Node.objects.get(graph=graph, key="Architecture/System Overview")  # markdown, wikilinks, neighbours
    # name: (url, what to wait for before the shot)
    pages = {
        "overview": (f"/g/{g}/", "#learning-glance div.chart svg.main-svg"),
        "explain": (f"/g/{g}/explain/", None),
        "injection": (f"/g/{g}/injections/{injection.pk}/?i=1&j=2", "#injection-graph[data-state=ready]"),
        "node": (f"/g/{g}/nodes/{note.pk}/", "#neighbourhood-graph[data-state=ready]"),
        "edge": (f"/g/{g}/edges/{edge.pk}/", "div.chart svg.main-svg"),
        "sessions": (f"/g/{g}/sessions/", None),
        "session": (f"/g/{g}/sessions/{session.external_id}/", None),
        "tune": (f"/g/{g}/tune/", "#policy-effects table"),
        "effects": (f"/g/{g}/policy/effects/", None),
        "batches": (f"/g/{g}/batches/", None),
        "batch": (f"/g/{g}/batches/{batch.pk}/", "div.chart svg.main-svg"),
        "audit": (f"/g/{g}/audit/", None),
        "impact": (f"/g/{g}/impact/", "div.chart svg.main-svg"),
        "members": (f"/g/{g}/members/", None),
        "admin": ("/admin/", None),
    }
    SHOTS.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        page = login(browser, live_server.url, "admin", password)
        for name, (url, ready) in pages.items():
            assert page.goto(live_server.url + url).status == 200, name
            if ready:
                page.wait_for_selector(ready, timeout=15000)
            page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
        # Restoring a revision: the tune page with its preview open (nothing written).
        page.goto(f"{live_server.url}/g/{g}/tune/")
        page.get_by_role("link", name="Preview restoring r1").click()
        preview = page.locator("#restore-preview")
        preview.locator("#restore-whatif-summary").wait_for(timeout=15000)
        preview.scroll_into_view_if_needed()
        preview.screenshot(path=str(SHOTS / "restore.png"))
        # A narrow screen (390 px): the navigation wraps, wide tables scroll in their own box.
        narrow = browser.new_page(viewport={"width": 390, "height": 844})
        narrow.context.add_cookies(page.context.cookies())
        narrow.goto(f"{live_server.url}/g/{g}/")
        narrow.wait_for_selector("#learning-glance div.chart svg.main-svg", timeout=15000)
        narrow.screenshot(path=str(SHOTS / "mobile-overview.png"))
        narrow.close()
        rank_chart = "div.chart[data-figure=impact-rank] svg.main-svg"
        # A screenshot per user (docs/dashboard.md, "Screenshots"), each as the demo user of that role, on the
        # page that answers their question: the reviewer's "why did #1 beat #2", the operator's policy and what-if,
        # the analyst's "is memory getting better"; and the analyst's answer on a 390 px phone.
        for name, (user, url, ready, width) in {
            "user-reviewer": (
                "reviewer",
                f"/g/{g}/injections/{injection.pk}/?i=1&j=2",
                "#injection-graph[data-state=ready]",
                1400,
            ),
            "user-operator": ("operator", f"/g/{g}/tune/", "#policy-effects table", 1400),
            "user-analyst": ("analyst", f"/g/{g}/impact/", rank_chart, 1400),
            "user-analyst-mobile": ("analyst", f"/g/{g}/impact/", rank_chart, 390),
        }.items():
            as_user = login(browser, live_server.url, user, password)
            as_user.set_viewport_size({"width": width, "height": 900})
            assert as_user.goto(live_server.url + url).status == 200, name
            as_user.wait_for_selector(ready, timeout=20000)
            as_user.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)
            as_user.close()
    shots = [*pages, "restore", "mobile-overview", "user-reviewer", "user-operator", "user-analyst"]
    assert all((SHOTS / f"{name}.png").stat().st_size > 10_000 for name in shots)
