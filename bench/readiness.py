"""What the readiness check (graphadmin.readiness) costs a context call, on a ready graph.

    .venv/bin/python -m bench.readiness            # imports demo/vault as graph rb/rb (sync embedding) once

Alternates, round by round: ``vectors_pending`` prepared and unprepared, one ``SELECT 1`` round trip, and
``ranking.context.assemble_context`` (question only, budget 5, rolled back); prints the medians and the
statement's EXPLAIN (ANALYZE). Figures: docs/history/performance-readiness.md.
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.loadtest import setup_django

QUESTIONS = ["how are edges ranked", "what does decay do", "why postgres", "how do agents report use", "the policy"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--calls", type=int, default=300, help="Readiness calls per round.")
    parser.add_argument("--contexts", type=int, default=15, help="Context calls per round.")
    args = parser.parse_args(argv)
    setup_django()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection, transaction

    from graphadmin import actions, readiness
    from graphadmin.models import Graph, Organization
    from graphadmin_client import RetrievalRequest
    from ranking.context import assemble_context
    from ranking.retrieval import prepare

    org, _ = Organization.objects.get_or_create(slug="rb", defaults={"name": "rb"})
    graph = Graph.objects.filter(organization=org, slug="rb").first()
    if graph is None:
        graph = actions.do_create_graph(org, "rb", "rb", actor="bench:readiness")
        call_command("import_vault", "demo/vault", "--graph", "rb", "--org", "rb", "--no-progress", "--embed", "sync")

    def context(i: int) -> None:
        with transaction.atomic():
            assemble_context(prepare(graph, RetrievalRequest(session=f"bench-{i}", query=QUESTIONS[i % 5], budget=5)))
            transaction.set_rollback(True)

    def round_trip() -> None:
        with connection.cursor() as cur:
            cur.execute("SELECT 1")
            cur.fetchone()

    def per_call(fn, n: int) -> float:
        started = time.perf_counter()
        for i in range(n):
            fn(i)
        return (time.perf_counter() - started) / n * 1000

    for i in range(10):
        context(i)
        readiness.vectors_pending(graph.pk)
    figures = {"prepared": [], "unprepared": [], "select 1": [], "assemble_context": []}
    prepared = settings.DATABASE_PREPARED_STATEMENTS
    try:
        for _ in range(args.rounds):
            for name, on in (("prepared", True), ("unprepared", False)):
                settings.DATABASE_PREPARED_STATEMENTS = on
                figures[name].append(per_call(lambda _i: readiness.vectors_pending(graph.pk), args.calls))
            settings.DATABASE_PREPARED_STATEMENTS = prepared
            figures["select 1"].append(per_call(lambda _i: round_trip(), args.calls))
            figures["assemble_context"].append(per_call(context, args.contexts))
    finally:
        settings.DATABASE_PREPARED_STATEMENTS = prepared
    print(f"graph {graph.pk}: vectors pending {readiness.vectors_pending(graph.pk)}")
    for name, values in figures.items():
        print(f"{name:>18}: median {statistics.median(values):8.3f} ms/call  rounds {[round(v, 3) for v in values]}")
    params = {"graphs": [graph.pk], "evidence": readiness.EVIDENCE_EDGE_TYPE, "no_type": readiness.NO_TYPE}
    with connection.cursor() as cur:
        cur.execute("EXPLAIN (ANALYZE) " + readiness.VECTORS_PENDING, {**params, "task": readiness.EMBED_TASK})
        print("\n".join(row[0] for row in cur.fetchall()[-2:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
