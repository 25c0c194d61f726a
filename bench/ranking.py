"""Ranking benchmark: rank (50 and 500 candidates, 2-hop), hybrid search, context assembly, next to raw-SQL floors.

    .venv/bin/python -m bench.generate [--scale S | --full]   # once: builds the bench database
    .venv/bin/python -m bench.ranking [--iterations 200]

Runs against the bench database only (see bench/common.py). For every scenario the same inputs go,
interleaved in the same iteration (after one untimed run of the floor, so that every method
meets warm buffers and none pays the cache misses for the others), through:

- **floor**: the same retrieval written by hand as one raw SQL statement that also computes the
  score and the order in SQL (no Python objects, no policy lookup, no validation);
- **db work**: the time spent inside the database by ``ranking.service`` for the request (policy
  lookup, start-node check, candidate query), measured with a Django execute wrapper;
- **service**: ``ranking.service`` end to end (database work + scoring in Python);
- **api**: the REST endpoint end to end through Django's test client (DRF parsing, tenancy,
  permissions, serialization; the request's transaction), with a persistent connection.

Hybrid search: recall@50 of the HNSW step against exact search (index scans off), the vector
step's latency (``candidates.vector_candidates``: settings + HNSW query), and the whole search.
Reported: median and p95 in milliseconds, and ratios of medians to the floor.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from contextlib import contextmanager

os.environ.setdefault("CONN_MAX_AGE", "600")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")

from bench.common import setup_django, summarize  # noqa: E402

FLOOR_1HOP = """
SELECT x.id, x.target_id,
       %(cw)s * ((1 - %(fi)s) * x.weight + %(fi)s * x.feedback_weight)
       + %(cs)s * COALESCE(1 - (t.embedding <=> %(q)s::vector), 0) + %(cp)s * et.priority AS score
FROM unnest(%(starts)s::bigint[]) s(id)
CROSS JOIN LATERAL (
    SELECT e.id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
    FROM graphadmin_edge e JOIN graphadmin_node n ON n.id = e.target_id AND NOT n.archived
    WHERE e.graph_id = %(g)s AND e.source_id = s.id AND NOT e.archived
    ORDER BY e.weight DESC, e.id LIMIT %(cap)s
) x
JOIN graphadmin_node t ON t.id = x.target_id
JOIN graphadmin_edgetype et ON et.id = x.edge_type_id
ORDER BY score DESC, x.id
"""

FLOOR_2HOP = """
WITH h1 AS (
    SELECT x.* FROM unnest(%(starts)s::bigint[]) s(id)
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM graphadmin_edge e JOIN graphadmin_node n ON n.id = e.target_id AND NOT n.archived
        WHERE e.graph_id = %(g)s AND e.source_id = s.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id LIMIT %(cap)s
    ) x
), h2 AS (
    SELECT x.* FROM (SELECT DISTINCT target_id AS id FROM h1) s
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM graphadmin_edge e JOIN graphadmin_node n ON n.id = e.target_id AND NOT n.archived
        WHERE e.graph_id = %(g)s AND e.source_id = s.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id LIMIT %(cap)s
    ) x
)
SELECT a.id, a.target_id,
       %(cw)s * ((1 - %(fi)s) * a.weight + %(fi)s * a.feedback_weight)
       + %(cs)s * COALESCE(1 - (t.embedding <=> %(q)s::vector), 0) + %(cp)s * et.priority AS score
FROM (SELECT * FROM h1 UNION ALL SELECT * FROM h2) a
JOIN graphadmin_node t ON t.id = a.target_id
JOIN graphadmin_edgetype et ON et.id = a.edge_type_id
ORDER BY score DESC, a.id
"""

FLOOR_VECTOR = """
SELECT id FROM graphadmin_node
WHERE graph_id = %(g)s AND NOT archived AND embedding IS NOT NULL
ORDER BY embedding <=> %(q)s::vector LIMIT %(k)s
"""


class DBTimer:
    """A Django execute wrapper that adds up the time spent in the database."""

    def __init__(self):
        self.seconds = 0.0

    def __call__(self, execute, sql, params, many, context):
        t = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.seconds += time.perf_counter() - t


@contextmanager
def timed(samples: list):
    t = time.perf_counter()
    yield
    samples.append((time.perf_counter() - t) * 1000.0)


def _unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", help="Also write the figures to this file.")
    args = parser.parse_args(argv)
    setup_django()

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction
    from rest_framework.test import APIClient

    from graphadmin.models import Graph
    from ranking import candidates as sql
    from ranking import service

    rnd = random.Random(args.seed)
    graph = Graph.objects.get(organization__slug="bench", slug="bench")
    user = get_user_model().objects.get(username="bench")
    client = APIClient()
    client.force_authenticate(user)
    revision, policy = service.policy_of(graph)
    cap = revision.fanout_cap
    coefs = {"cw": policy.coef_weight, "cs": policy.coef_semantic, "cp": policy.coef_priority, "fi": policy.feedback_influence}

    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM graphadmin_node WHERE graph_id = %s", [graph.pk])
        n_nodes = cur.fetchone()[0]
        cur.execute("SELECT count(*) FROM graphadmin_edge WHERE graph_id = %s", [graph.pk])
        n_edges = cur.fetchone()[0]
        # Start nodes by active out-degree: hubs (>= cap) give exactly cap candidates per start at 1 hop.
        cur.execute(
            """
            SELECT e.source_id, count(*) FROM graphadmin_edge e JOIN graphadmin_node n ON n.id = e.source_id AND NOT n.archived
            JOIN graphadmin_node t ON t.id = e.target_id AND NOT t.archived
            WHERE e.graph_id = %s AND NOT e.archived GROUP BY e.source_id
            """,
            [graph.pk],
        )
        degrees = cur.fetchall()
        cur.execute(
            "SELECT embedding::text FROM graphadmin_node WHERE graph_id = %s AND NOT archived ORDER BY random() LIMIT 500",
            [graph.pk],
        )
        seeds = [json.loads(r[0]) for r in cur.fetchall()]
    hubs = [s for s, d in degrees if d >= cap]
    mids = [s for s, d in degrees if 5 <= d < cap]
    all_active = [s for s, _d in degrees]

    def query():
        base = rnd.choice(seeds)
        return _unit([x + rnd.gauss(0, 0.03) for x in base])

    results = {}

    def scenario(name, starts_fn, hops):
        floor, dbw, svc, api, considered = [], [], [], [], []
        floor_sql = FLOOR_1HOP if hops == 1 else FLOOR_2HOP
        for it in range(args.iterations + 10):
            starts, q = starts_fn(), query()
            params = {"g": graph.pk, "starts": starts, "cap": cap, "q": sql.vector_literal(q), **coefs}
            keep = it >= 10  # the first 10 warm caches up
            with connection.cursor() as cur:  # untimed: every method then runs on warm buffers, none pays the misses
                cur.execute(floor_sql, params)
                cur.fetchall()
            with connection.cursor() as cur, timed(floor if keep else []):
                cur.execute(floor_sql, params)
                cur.fetchall()
            timer = DBTimer()
            with connection.execute_wrapper(timer), timed(svc if keep else []):
                result = service.rank(graph, starts, vector=q, k=50, hops=hops)
            if keep:
                dbw.append(timer.seconds * 1000.0)
                considered.append(result.considered)
            with timed(api if keep else []):
                r = client.post(f"/api/graphs/{graph.pk}/rank/", {"start_nodes": starts, "vector": q, "k": 50, "hops": hops}, format="json")
            assert r.status_code == 200, r.content
        results[name] = {"floor": summarize(floor), "db_work": summarize(dbw), "service": summarize(svc), "api": summarize(api),
                         "candidates": summarize(considered)}

    scenario("rank, 50 candidates (1 hop)", lambda: [rnd.choice(hubs)], 1)
    scenario("rank, 500 candidates (1 hop, 10 starts)", lambda: rnd.sample(hubs, 10), 1)
    scenario("rank, 2 hops", lambda: [rnd.choice(mids)], 2)

    # Hybrid search.
    floor, vec, exact_ms, svc, api, recalls = [], [], [], [], [], []
    for it in range(args.iterations + 10):
        q = query()
        keep = it >= 10
        with transaction.atomic(), connection.cursor() as cur:  # untimed warm-up, as above
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(sql.ef_search_for(50))])
            cur.execute(FLOOR_VECTOR, {"g": graph.pk, "q": sql.vector_literal(q), "k": 50})
        with transaction.atomic(), connection.cursor() as cur, timed(floor if keep else []):
            cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [str(sql.ef_search_for(50))])
            cur.execute(FLOOR_VECTOR, {"g": graph.pk, "q": sql.vector_literal(q), "k": 50})
            cur.fetchall()
        with timed(vec if keep else []):
            hits = sql.vector_candidates(graph.pk, q, 50)
        with transaction.atomic(), connection.cursor() as cur, timed(exact_ms if keep else []):
            cur.execute("SET LOCAL enable_indexscan = off")
            cur.execute(FLOOR_VECTOR, {"g": graph.pk, "q": sql.vector_literal(q), "k": 50})
            exact = {r[0] for r in cur.fetchall()}
        if keep:
            recalls.append(len(exact & {h.node_id for h in hits}) / 50.0)
        anchors = rnd.sample(all_active, 2)
        with timed(svc if keep else []):
            service.search(graph, vector=q, k=50, anchors=anchors)
        with timed(api if keep else []):
            r = client.post(f"/api/graphs/{graph.pk}/search/", {"vector": q, "k": 50, "anchors": anchors}, format="json")
        assert r.status_code == 200, r.content
    results["hybrid search, k=50, 2 anchors"] = {
        "floor": summarize(floor), "vector_step": summarize(vec), "exact": summarize(exact_ms), "service": summarize(svc),
        "api": summarize(api),
        "recall_at_50": {"mean": sum(recalls) / len(recalls), "p5": sorted(recalls)[len(recalls) // 20], "min": min(recalls),
                         "zero": sum(1 for r in recalls if r == 0.0)},
    }

    # Context assembly (writes an injection per call into the bench database).
    floor, svc, api = [], [], []
    for it in range(args.iterations + 10):
        starts, q = rnd.sample(hubs, 10), query()
        keep = it >= 10
        params = {"g": graph.pk, "starts": starts, "cap": cap, "q": sql.vector_literal(q), **coefs}
        with connection.cursor() as cur:  # untimed warm-up, as above
            cur.execute(FLOOR_1HOP, params)
            cur.fetchall()
        with connection.cursor() as cur, timed(floor if keep else []):
            cur.execute(FLOOR_1HOP, params)
            cur.fetchall()
        with transaction.atomic(), timed(svc if keep else []):
            service.assemble_context(graph, session_id=f"bench-{it}", vector=q, start_nodes=starts, budget_unit="tokens", budget=2000, hops=1)
        with timed(api if keep else []):
            r = client.post(
                f"/api/graphs/{graph.pk}/context/",
                {"session": f"bench-api-{it}", "vector": q, "start_nodes": starts, "budget_unit": "tokens", "budget": 2000, "hops": 1},
                format="json",
            )
        assert r.status_code == 201, r.content
    results["context, 500 candidates, 2000 tokens"] = {"floor": summarize(floor), "service": summarize(svc), "api": summarize(api)}

    header = {"nodes": n_nodes, "edges": n_edges, "iterations": args.iterations, "fanout_cap": cap}
    print(render(header, results))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"graph": header, "results": results}, fh, indent=2)


def render(header: dict, results: dict) -> str:
    lines = [f"graph: {header['nodes']} nodes, {header['edges']} edges; {header['iterations']} iterations; fanout_cap {header['fanout_cap']}", ""]
    lines.append("| scenario | measure | median ms | p95 ms | median / floor |")
    lines.append("|---|---|---:|---:|---:|")
    for name, r in results.items():
        floor = r["floor"]["median"]
        for measure, s in r.items():
            if measure in ("candidates", "recall_at_50"):
                continue
            ratio = "" if measure == "floor" else f"{s['median'] / floor:.2f}x"
            lines.append(f"| {name} | {measure} | {s['median']:.2f} | {s['p95']:.2f} | {ratio} |")
        if "candidates" in r:
            lines.append(f"| {name} | candidates considered | {r['candidates']['median']:.0f} | {r['candidates']['p95']:.0f} | |")
        if "recall_at_50" in r:
            rc = r["recall_at_50"]
            lines.append(f"| {name} | recall@50 vs exact: mean / p5 / min / queries at 0 | {rc['mean']:.3f} | {rc['p5']:.2f} / {rc['min']:.2f} / {rc['zero']} | |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
