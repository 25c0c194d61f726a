"""Profile the load test's two hot paths in one process with pyinstrument: the context call, and the drain.

    .venv/bin/python -m bench.profile_paths --sessions 100 [--html /tmp/profile]

Runs against the database of this checkout (``make run``'s demo graph; stop ``make run`` first, so its
worker does not drain the reports made here). Each context call goes through the whole request path
(Django's test client: middleware, DRF, token, the view) as the load test's agents send it; then one
use report and one outcome per session are stored in the outbox and drained by ``feedback.outbox.drain``,
as the worker does. Prints wall and CPU time per call and pyinstrument's call tree of each part.
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
    parser.add_argument("--html", default="", help="Also write each profile as HTML: PREFIX-context.html, ...")
    parser.add_argument(
        "--cpu",
        type=int,
        default=0,
        help="Instead of pyinstrument's wall-clock tree, cProfile on CPU time (time.process_time): the top N "
        "functions by cumulative CPU. On a busy machine wall time is mostly waiting; CPU time is what 2 cores spend.",
    )
    args = parser.parse_args(argv)
    setup_django()

    from django.test import Client

    from feedback import outbox
    from feedback.models import AgentSession
    from feedback.report import Report
    from feedback.rules import UseItem
    from graphadmin.models import Graph

    graph = Graph.objects.get(organization__slug=args.org, slug=args.graph)
    token = agent_token(args.org, "loadtest-agent")
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION=f"Token {token}")
    questions, rng = load_questions(), random.Random(0)

    def context(session):
        body = {"session": session, "query": rng.choice(questions), "budget": 5}
        response = client.post(f"/api/graphs/{graph.pk}/context/", json.dumps(body), content_type="application/json")
        assert response.status_code in (200, 201), response.content[:300]
        return response.json()

    for _ in range(3):  # warm: the model, the query cache's first misses, connections
        context(f"warm-{uuid.uuid4().hex[:8]}")
    sessions = []
    profiler = _profiler(args.cpu)
    wall, cpu = time.perf_counter(), time.process_time()
    with profiler:
        for _ in range(args.sessions):
            name = f"prof-{uuid.uuid4().hex[:12]}"
            sessions.append((name, context(name)))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"context: {args.sessions} calls, {wall / args.sessions * 1000:.1f} ms wall, "
        f"{cpu / args.sessions * 1000:.1f} ms CPU per call (this process)"
    )
    _report(profiler, args.html, "context", args.cpu)

    names = [n for n, _ in sessions]
    by_name = {s.external_id: s for s in AgentSession.objects.filter(graph=graph, external_id__in=names)}
    reports = 0
    for name, body in sessions:
        session = by_name[name]
        nodes = list(dict.fromkeys(item["node"] for item in body.get("items", [])))
        if nodes:
            items = tuple(UseItem("node", n, "explicit") for n in nodes[:2])
            outbox.record(None, session, Report("uses", f"uses:{session.pk}:{uuid.uuid4().hex}", items))
            reports += 1
        outcome = rng.choice(["accepted", "accepted", "rework", "rejected"])
        outbox.record(None, session, Report("outcome", f"outcome:{session.pk}:{uuid.uuid4().hex}", outcome=outcome))
        reports += 1
    profiler = _profiler(args.cpu)
    wall, cpu = time.perf_counter(), time.process_time()
    with profiler:
        counts = outbox.drain(graph.pk)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(
        f"drain: {reports} reports {counts}, {wall / reports * 1000:.1f} ms wall, "
        f"{cpu / reports * 1000:.1f} ms CPU per report (this process)"
    )
    _report(profiler, args.html, "drain", args.cpu)
    return 0


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
