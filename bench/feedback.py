"""Benchmark of the feedback write path against the raw set-based SQL floor, in the same run.

    .venv/bin/python bench/feedback.py               # default: 20,000 edges
    .venv/bin/python bench/feedback.py --edges 200000
    .venv/bin/python bench/feedback.py --full        # 1,000,000 edges

It works in its own database, ``graphadmin_bench_feedback`` on the same server (the embedded one
unless DATABASE_URL is set), dropped and re-created each run: dev and test data are never touched.
Edges are generated with set-based SQL. Figures are medians over the repetitions.

1. Outcome of 200 items (100 edges + 100 nodes, each session its own random edges), through
   ``actions.apply_outcome`` (lock, EMA, history, batch, audit), against two floors measured on
   the same rows: the bare UPDATEs of the same 200 rows in one transaction, and those UPDATEs plus
   the history INSERT (what any rollback-capable design must write).
2. Decay of every edge (``actions.decay``, chunked, one batch per chunk), against one raw
   ``UPDATE ... SET weight = greatest(floor, weight * rate)`` of the same rows: seconds, and bytes
   of history per edge (growth of the WeightChange table and its indexes).
3. Rollback of one batch that changed every edge (a ``normalize`` batch).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")
os.environ.setdefault("SECRET_KEY", "bench-only-insecure-key")
BENCH_DB = "graphadmin_bench_feedback"
os.environ["DATABASE_NAME"] = BENCH_DB


def _recreate_database():
    import psycopg
    from django.conf import settings

    s = settings.DATABASES["default"]
    assert s["NAME"] == BENCH_DB, "the benchmark only ever writes to its own database"
    with psycopg.connect(host=s["HOST"], port=s.get("PORT") or None, user=s["USER"], password=s.get("PASSWORD") or None,
                         dbname="postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DB}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{BENCH_DB}"')


def _median_p95(samples):
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edges", type=int, default=20_000)
    parser.add_argument("--full", action="store_true", help="1,000,000 edges.")
    parser.add_argument("--outcomes", type=int, default=60, help="Outcome repetitions (each a fresh session).")
    parser.add_argument("--repeat", type=int, default=3, help="Decay repetitions.")
    parser.add_argument("--chunk", type=int, default=None, help="Decay chunk size (edge ids per transaction).")
    args = parser.parse_args()
    n_edges = 1_000_000 if args.full else args.edges
    fanout = 10
    n_nodes = max(n_edges // fanout, 200)

    import django

    django.setup()
    _recreate_database()
    from django.core.management import call_command
    from django.db import connection, transaction

    from feedback import actions
    from feedback.models import AgentSession, ContextInjection, UpdateBatch
    from graphadmin import services
    from graphadmin.models import Graph, Organization

    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("bench", password="bench-pw")
    org = Organization.objects.create(slug="bench", name="Bench")
    graph = services.create_graph(user, org, "bench", "Bench graph")
    g = graph.pk
    old = datetime.now(timezone.utc) - timedelta(days=60)
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        cur.execute(
            """INSERT INTO graphadmin_node (graph_id, key, kind, title, text, source, aliases, tags, content_hash,
                                            feedback_weight, archived, created_at, updated_at)
               SELECT %s, 'n' || i, 'note', 'Node ' || i, '', '', '[]', '[]', '', 0.5, false, %s, %s
               FROM generate_series(0, %s - 1) AS i""",
            [g, old, old, n_nodes],
        )
        cur.execute("SELECT min(id) FROM graphadmin_node WHERE graph_id = %s", [g])
        base = cur.fetchone()[0]
        cur.execute("SELECT array_agg(id ORDER BY id) FROM graphadmin_edgetype WHERE graph_id = %s", [g])
        types = cur.fetchone()[0]
        cur.execute(
            """INSERT INTO graphadmin_edge (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight,
                                            archived, created_at, updated_at)
               SELECT %(g)s, %(base)s + i / %(f)s, %(base)s + ((i / %(f)s) + 1 + i %% %(f)s) %% %(n)s,
                      (%(types)s::bigint[])[1 + i %% 3], 0.3 + 0.4 * random(), 0.5, false, %(old)s, %(old)s
               FROM generate_series(0, %(e)s - 1) AS i""",
            {"g": g, "base": base, "f": fanout, "n": n_nodes, "types": types, "old": old, "e": n_edges},
        )
        cur.execute("ANALYZE graphadmin_node; ANALYZE graphadmin_edge")
    print(f"generated {n_nodes:,} nodes and {n_edges:,} edges in {time.perf_counter() - t0:.1f} s")

    # ---------------------------------------------------------------- 1. outcome of 200 items
    with connection.cursor() as cur:
        cur.execute("SELECT id, target_id FROM graphadmin_edge WHERE graph_id = %s", [g])
        all_edges = cur.fetchall()
    rng = random.Random(5)
    policy = graph.current_policy()
    picks = []
    for i in range(args.outcomes * 2):
        chosen = rng.sample(all_edges, 100)
        # One candidate per edge; its node is the edge's target (nodes deduplicated like the action does).
        session = AgentSession.objects.create(graph=graph, external_id=f"bench-{i}")
        injection = ContextInjection.objects.create(graph=graph, session=session, policy_revision=policy, query="bench")
        with connection.cursor() as cur:
            cur.execute(
                """INSERT INTO feedback_injectioncandidate (injection_id, graph_id, rank, selected, node_id, edge_id, hops, tokens,
                                                           total, features, components)
                   SELECT %s, %s, r, true, t, e, 1, 10, 0.5, '{}', '{}'
                   FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS x(e, t, r)""",
                [injection.pk, g, [e for e, _ in chosen], [t for _, t in chosen]],
            )
        picks.append((session, [e for e, _ in chosen], sorted({t for _, t in chosen})))
    action_ms, floor_ms, floor_hist_ms, items = [], [], [], []
    alpha, score = policy.ema_alpha, policy.outcome_accepted
    for i in range(args.outcomes):
        session, edge_ids, node_ids = picks[2 * i]
        t = time.perf_counter()
        result = actions.apply_outcome("bench", graph, session.external_id, "accepted")
        action_ms.append((time.perf_counter() - t) * 1000)
        items.append(result.edge_updates + result.node_updates)
        # The floors, on a different session's rows of the same size (so both write real changes).
        _s, f_edges, f_nodes = picks[2 * i + 1]
        t = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("UPDATE graphadmin_edge SET feedback_weight = %s * %s + (1 - %s) * feedback_weight WHERE id = ANY(%s)",
                        [alpha, score, alpha, f_edges])
            cur.execute("UPDATE graphadmin_node SET feedback_weight = %s * %s + (1 - %s) * feedback_weight WHERE id = ANY(%s)",
                        [alpha, score, alpha, f_nodes])
        floor_ms.append((time.perf_counter() - t) * 1000)
        batch = UpdateBatch.objects.create(graph=graph, kind="outcome", started_at=datetime.now(timezone.utc))
        t = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            for table, col, ids in (("graphadmin_edge", "edge_id", f_edges), ("graphadmin_node", "node_id", f_nodes)):
                cur.execute(
                    f"""WITH u AS (UPDATE {table} t SET feedback_weight = %s * %s + (1 - %s) * t.feedback_weight
                                    FROM {table} o WHERE t.id = o.id AND t.id = ANY(%s)
                                    RETURNING t.id, o.feedback_weight AS before, t.feedback_weight AS after)
                        INSERT INTO feedback_weightchange (batch_id, graph_id, {col}, field, before, after, event, created_at)
                        SELECT %s, %s, id, 'feedback_weight', before, after, 'accepted', now() FROM u""",
                    [alpha, score, alpha, ids, batch.pk, g],
                )
        floor_hist_ms.append((time.perf_counter() - t) * 1000)
    a_med, a_p95 = _median_p95(action_ms)
    f_med, _ = _median_p95(floor_ms)
    h_med, _ = _median_p95(floor_hist_ms)
    print(f"\n1. outcome, {statistics.median(items):.0f} items (x{args.outcomes}, medians)")
    print(f"   action (lock + EMA + history + batch + audit): median {a_med:.2f} ms, p95 {a_p95:.2f} ms")
    print(f"   floor: bare UPDATEs {f_med:.2f} ms -> ratio {a_med / f_med:.2f}x")
    print(f"   floor: UPDATEs + history INSERT {h_med:.2f} ms -> ratio {a_med / h_med:.2f}x")

    # ---------------------------------------------------------------- 2. decay of every edge
    def history_bytes():
        with connection.cursor() as cur:
            cur.execute("SELECT pg_total_relation_size('feedback_weightchange')")
            return cur.fetchone()[0]

    graph = Graph.objects.select_related("organization").get(pk=g)
    rate, floor = policy.decay_rate, policy.weight_floor
    decay_s, raw_s, per_edge, decayed = [], [], [], []
    start = datetime.now(timezone.utc) + timedelta(days=1)
    chunk = args.chunk or actions.DECAY_CHUNK
    for r in range(args.repeat):
        t = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute("UPDATE graphadmin_edge SET weight = greatest(%s, weight * %s) WHERE graph_id = %s AND NOT archived AND weight > %s",
                        [floor, rate, g, floor])
            raw_rows = cur.rowcount
        raw_s.append(time.perf_counter() - t)
        before = history_bytes()
        t = time.perf_counter()
        result = actions.decay("bench", graph, now=start + timedelta(days=7 * (r + 1)), chunk_size=chunk)
        decay_s.append(time.perf_counter() - t)
        decayed.append(result.edge_updates)
        per_edge.append((history_bytes() - before) / max(result.edge_updates, 1))
        print(f"   decay round {r + 1}: raw UPDATE {raw_rows:,} rows {raw_s[-1]:.2f} s; action {result.edge_updates:,} edges "
              f"{decay_s[-1]:.2f} s in {len(result.details['batches'])} chunk batches")
    d_med, r_med = statistics.median(decay_s), statistics.median(raw_s)
    print(f"\n2. decay of {statistics.median(decayed):,.0f} edges (x{args.repeat}, medians, chunk {chunk})")
    print(f"   action: {d_med:.2f} s ({d_med / statistics.median(decayed) * 1e6:.1f} us/edge), history {statistics.median(per_edge):.0f} bytes/edge")
    print(f"   floor: one raw UPDATE {r_med:.2f} s -> ratio {d_med / r_med:.2f}x")

    # ---------------------------------------------------------------- 3. rollback of a large batch
    with connection.cursor() as cur:
        cur.execute("UPDATE graphadmin_edge SET weight = weight * 0.9 WHERE graph_id = %s", [g])  # max < 1: normalize has work
    t = time.perf_counter()
    normalized = actions.normalize("bench", graph, chunk_size=10**12)  # one batch of every edge
    n_s = time.perf_counter() - t
    t = time.perf_counter()
    undone = actions.rollback("bench", UpdateBatch.objects.get(pk=normalized.batch_id))
    rb_s = time.perf_counter() - t
    print(f"\n3. rollback of a {normalized.edge_updates:,}-change batch: {rb_s:.2f} s "
          f"({undone.edge_updates:,} restored, {undone.conflicts} conflicts); the normalize itself took {n_s:.2f} s")


if __name__ == "__main__":
    main()
