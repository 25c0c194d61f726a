"""Where the load test's two hot paths spend their CPU: the context call, and a session's reports (intake and drain).

    .venv/bin/python -m bench.profile_paths --sessions 100            # the stage table (docs/performance.md)
    .venv/bin/python -m bench.profile_paths --sessions 100 --tree     # pyinstrument's call tree instead
    .venv/bin/python -m bench.profile_paths --sessions 100 --cpu 40   # cProfile: top 40 functions by CPU
    .venv/bin/python -m bench.profile_paths --sessions 60 --batch 1   # the drain one report per batch (one agent)

Runs against the database of this checkout (``make run``'s demo graph; stop ``make run`` first, or at least
its worker, so that it does not drain the reports made here). Each call goes through the whole request path
(Django's test client: middleware, DRF, token, the view) as the load test's agents send it: the context
call, then the session's use report and outcome (202, into the outbox), then ``feedback.outbox.drain`` as
the worker runs it.

The default output is one table per path (bench/stages.py): each stage's CPU per call in this process
(``web``; the worker's for the drain) and in its PostgreSQL backend (``db``), against the stage's floor:
for a SELECT the same statement run again past Django; for auth, parsing, serialisation, commit and the
rest the smallest thing that stage must do (measured in the same run: a SHA-512 of the key, ``json.loads``
of the body, ``json.dumps`` of the answer, one round trip, a ``/healthz`` request through the same middleware).
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import time
import uuid

from pyinstrument import Profiler

from bench.loadtest import agent_token, load_questions, setup_django


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--org", default="demo")
    parser.add_argument("--graph", default="demo")
    parser.add_argument("--tree", action="store_true", help="pyinstrument's wall-clock call tree of each path.")
    parser.add_argument("--html", default="", help="With --tree, also write each profile as HTML: PREFIX-context.html")
    parser.add_argument(
        "--cpu",
        type=int,
        default=0,
        help="Instead of pyinstrument's wall-clock tree, cProfile on CPU time (time.process_time): the top N "
        "functions by cumulative CPU. On a busy machine wall time is mostly waiting; CPU time is what 2 cores spend.",
    )
    parser.add_argument("--no-floors", action="store_true", help="Do not run each SELECT a second time for its floor.")
    parser.add_argument(
        "--batch",
        type=int,
        default=0,
        help="Reports per drained batch (default: the drain's own, 50). 1 applies each report in a batch of its "
        "own, as at one agent when a session's reports are drained apart; 2 a session's use report and outcome "
        "together, as the worker's coalescing window does.",
    )
    args = parser.parse_args(argv)
    setup_django()

    from django.test import Client

    from feedback import outbox
    from graphadmin.models import Graph

    graph = Graph.objects.get(organization__slug=args.org, slug=args.graph)
    token = agent_token(args.org, "loadtest-agent")
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {token}")
    questions, rng = load_questions(), random.Random(0)
    base = f"/api/graphs/{graph.pk}"

    def post(path, body, expect=(200, 201, 202)):
        response = client.post(path, json.dumps(body), content_type="application/json")
        assert response.status_code in expect, (path, response.status_code, response.content[:300])
        return response.json()

    def context(session):
        return post(f"{base}/context/", {"session": session, "query": rng.choice(questions), "budget": 5})

    def report(session, body):
        nodes = list(dict.fromkeys(item["node"] for item in body.get("items", [])))
        if nodes:
            post(f"{base}/sessions/{session}/uses/", {"items": [{"node": n, "signal": "explicit"} for n in nodes[:2]]})
        outcome = rng.choice(["accepted", "accepted", "rework", "rejected"])
        post(f"{base}/sessions/{session}/outcome/", {"outcome": outcome})
        return 2 if nodes else 1

    for _ in range(3):  # warm: the model, the caches' first misses, connections
        name = f"warm-{uuid.uuid4().hex[:8]}"
        report(name, context(name))
    outbox.drain(graph.pk)

    names = [f"prof-{uuid.uuid4().hex[:12]}" for _ in range(args.sessions)]
    bodies = {}
    reports = [0]

    def run_context():
        for name in names:
            bodies[name] = context(name)

    def run_reports():
        for name in names:
            reports[0] += report(name, bodies[name])

    def run_drain():
        return outbox.drain(graph.pk, batch_size=args.batch or outbox.BATCH_SIZE)

    if args.tree or args.cpu:
        for label, fn, per in (
            ("context", run_context, None),
            ("reports", run_reports, None),
            ("drain", run_drain, None),
        ):
            profiler = _profiler(args.cpu)
            wall, cpu = time.perf_counter(), time.process_time()
            with profiler:
                fn()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            n = per or (reports[0] if label != "context" else args.sessions) or 1
            print(f"{label}: {n} calls, {wall / n * 1000:.1f} ms wall, {cpu / n * 1000:.1f} ms CPU per call")
            _report(profiler, args.html, label, args.cpu)
        return 0

    print(f"{args.sessions} sessions on {args.org}/{args.graph}; CPU per call, ms (web: this process; db: its backend)")
    for label, fn in (("context", run_context), ("reports", run_reports), ("drain", run_drain)):
        stages = _stages(not args.no_floors)
        from django.db import connection

        web0, db0 = time.process_time(), stages._db_clock()
        with connection.execute_wrapper(stages.sql_wrapper):
            result = fn()
        web, db = time.process_time() - web0 - stages._excluded[0], stages._db_clock() - db0 - stages._excluded[1]
        stages.unwrap()
        _floors(stages, client, token, graph)
        n = args.sessions if label == "context" else reports[0]
        unit = "context call" if label == "context" else "report"
        print(f"\n### {label}: per {unit} ({n}{'; ' + str(result) if result else ''})\n")
        print(stages.table(n, web, db, FLOORS))
        if stages.missing:
            print(f"\n(not found, not staged: {', '.join(stages.missing)})")
    return 0


# The stages: the functions of the request path, by dotted name (a name that no longer exists is listed, not staged).
STAGES = [
    ("graphadmin.api.auth.TokenAuthentication.authenticate", "auth and access"),
    ("graphadmin.api.views.GraphScopedMixin.check_access", "auth and access"),
    ("rest_framework.request.Request._parse", "request parsing and validation"),
    ("rest_framework.serializers.BaseSerializer.is_valid", "request parsing and validation"),
    ("ranking.retrieval.query_vector", "embedding"),
    ("ranking.retrieval.retrieve", "retrieval: expansion and scoring (Python)"),
    ("ranking.context.retrieve", "retrieval: expansion and scoring (Python)"),
    ("ranking.api.assemble_context", "budget, log and answer (Python)"),
    ("ranking.queries.copy_candidates", "candidate log"),
    ("ranking.queries.bump_counters", "counters"),
    ("feedback.reports.report_uses", "report intake (Python)"),
    ("feedback.reports.report_outcome", "report intake (Python)"),
    ("feedback.outbox._apply_batch", "report application (Python)"),
    ("graphadmin.outbox.publish", "enqueue (Celery publish, on commit)"),
    ("rest_framework.renderers.JSONRenderer.render", "serialisation"),
    ("ranking.api.context_payload", "serialisation"),
    ("django.db.backends.base.base.BaseDatabaseWrapper.commit", "commit"),
]
# Each stage's floor, measured by _floors in the same run.
FLOORS = {
    "auth and access": "SHA-512 of the key (knox's digest)",
    "request parsing and validation": "json.loads of the body",
    "serialisation": "json.dumps of the answer",
    "commit": "one round trip (SELECT 1)",
    "embedding": "embed_query, cached (the load test repeats questions)",
    "rest (Django, DRF, middleware)": "GET /healthz through the same middleware",
}


def _stages(floors: bool):
    from bench.stages import Stages

    stages = Stages(floors=floors)
    for dotted, name in STAGES:
        stages.wrap(dotted, name)
    return stages


def _floors(stages, client, token: str, graph) -> None:
    from django.db import connection
    from knox.crypto import hash_token

    from graphadmin.embeddings import embed_query

    body = json.dumps({"session": "s", "query": load_questions()[0], "budget": 5})
    answer = {"items": [{"node": i, "text": "x" * 400, "title": "t", "path": [i]} for i in range(5)], "budget": 5}
    stages.measure_floor(FLOORS["auth and access"], lambda: hash_token(token))
    stages.measure_floor(FLOORS["request parsing and validation"], lambda: json.loads(body))
    stages.measure_floor(FLOORS["serialisation"], lambda: json.dumps(answer))
    connection.ensure_connection()
    stages.measure_floor(FLOORS["commit"], lambda: connection.connection.execute("SELECT 1").fetchall())
    stages.measure_floor(FLOORS["embedding"], lambda: embed_query(load_questions()[0]))
    stages.measure_floor(FLOORS["rest (Django, DRF, middleware)"], lambda: client.get("/healthz"))


def _profiler(cpu: int):
    if cpu:
        return cProfile.Profile(time.process_time)
    return Profiler(interval=0.0005)


def _report(profiler, html: str, name: str, cpu: int) -> None:
    if cpu:
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(cpu)
        return
    print(profiler.output_text(unicode=False, color=False, show_all=False))
    if html:
        with open(f"{html}-{name}.html", "w") as f:
            f.write(profiler.output_html())


if __name__ == "__main__":
    raise SystemExit(main())
