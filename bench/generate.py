"""Generate a benchmark graph of realistic shape in the bench database, set-based in SQL.

    .venv/bin/python -m bench.generate                # scale 0.05: 10k nodes, ~50k edges
    .venv/bin/python -m bench.generate --scale 0.5    # 100k nodes, ~500k edges
    .venv/bin/python -m bench.generate --full         # 200k nodes, ~1M edges

Shape:
- 384-dimension embeddings in clusters: 1 + nodes/200 cluster centroids, grouped in topics (one per
  ten clusters) around a direction all embeddings share (real sentence embeddings are anisotropic):
  centroid = normalise(0.5 shared + 0.6 topic + 0.6 own); each node its centroid plus Gaussian noise
  (sigma 0.04 per dimension, about 0.8 in norm), L2-normalised. Cosine similarity is about 0.6
  within a cluster, 0.4 within a topic and 0.2 across topics.
- Power-law degrees: edge sources are drawn as floor(N * u**3) (degree of the i-th node ~ i^(-2/3),
  a heavy tail with hubs of thousands of edges); targets are in the source's cluster 70% of the
  time, else drawn with a milder power law (floor(N * u**2)).
- Six edge types with priorities in [-0.5, 0.8]; weights skewed towards 1 (u**0.7); feedback
  weights around 0.5; 1% of nodes and of edges archived; update times spread over 90 days.
- Triplet embeddings are left empty (the ranking benchmarks do not read them).

The bench database is dropped and created anew on every run. While loading, the HNSW index is
dropped (and built once afterwards: much faster than inserting into it row by row) and foreign
key triggers are skipped (``session_replication_role = replica``: the generator's ids are
consistent by construction).
"""

from __future__ import annotations

import argparse
import time

from bench.common import BENCH_DATABASE

EDGE_TYPES = {
    "related": 0.0,
    "derived_from": 0.3,
    "depends_on": 0.5,
    "supersedes": 0.8,
    "mentions": -0.2,
    "contradicts": -0.5,
}
FULL_NODES = 200_000
FULL_EDGES = 1_000_000


def _drop_database():
    import psycopg
    from django.conf import settings

    db = settings.DATABASES["default"]
    # Never drop anything that is not obviously a bench database (BENCH_DATABASE is configurable).
    if "bench" not in BENCH_DATABASE or db["NAME"] != BENCH_DATABASE:
        raise SystemExit(f"Refusing to drop {db['NAME']!r}: not the bench database.")
    kwargs = {"host": db.get("HOST") or None, "user": db.get("USER") or None, "password": db.get("PASSWORD") or None,
              "port": db.get("PORT") or None, "dbname": "postgres", "autocommit": True}
    with psycopg.connect(**{k: v for k, v in kwargs.items() if v is not None}) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{BENCH_DATABASE}" WITH (FORCE)')


def generate(scale: float, seed: float = 0.42) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from graphadmin import services
    from graphadmin.models import EdgeType, Membership, Organization

    nodes = max(1000, int(FULL_NODES * scale))
    edges_target = max(5000, int(FULL_EDGES * scale))
    clusters = 1 + nodes // 200
    topics = 1 + clusters // 10
    timings = {}
    with transaction.atomic():
        org = Organization.objects.create(slug="bench", name="Bench")
        user = get_user_model().objects.create_user(username="bench", password=None)
        Membership.objects.create(user=user, organization=org, role="admin")
        graph = services.create_graph(user, org, "bench", "Benchmark graph", edge_types={k: "" for k in EDGE_TYPES})
        for name, priority in EDGE_TYPES.items():
            EdgeType.objects.filter(graph=graph, name=name).update(priority=priority)
        type_ids = list(EdgeType.objects.filter(graph=graph).order_by("name").values_list("id", flat=True))

    with connection.cursor() as cur:
        cur.execute("SELECT setseed(%s)", [seed])
        cur.execute("SET session_replication_role = replica")
        cur.execute("SET maintenance_work_mem = '1GB'")
        cur.execute("SET max_parallel_maintenance_workers = 1")
        cur.execute("DROP INDEX IF EXISTS node_embedding_hnsw")

        t = time.perf_counter()
        cur.execute(
            """
            CREATE TEMP TABLE bench_topic AS
            SELECT t AS id, ARRAY(SELECT random_normal() / sqrt(384) FROM generate_series(1, 384 + 0 * t)) AS v
            FROM generate_series(0, %(topics)s) t
            """,
            {"topics": topics},
        )
        # Topic 0 is the direction every embedding shares (real sentence embeddings are anisotropic).
        cur.execute(
            """
            CREATE TEMP TABLE bench_centroid AS
            SELECT c AS id,
                   l2_normalize(ARRAY(
                       SELECT 0.5 * m.v[i] + 0.6 * t.v[i] + 0.6 * random_normal() / sqrt(384)
                       FROM generate_series(1, 384 + 0 * c) i
                   )::vector(384)) AS v
            FROM generate_series(0, %(clusters)s - 1) c
            JOIN bench_topic t ON t.id = 1 + c %% %(topics)s
            CROSS JOIN (SELECT v FROM bench_topic WHERE id = 0) m
            """,
            {"clusters": clusters, "topics": topics},
        )
        cur.execute(
            """
            INSERT INTO graphadmin_node (graph_id, key, kind, title, text, source, aliases, tags, content_hash, embedding,
                                         feedback_weight, archived, created_at, updated_at)
            SELECT %(graph)s, 'n' || i, (ARRAY['note', 'decision', 'observation', 'research'])[1 + i %% 4],
                   'Node ' || i || ' of cluster ' || (i %% %(clusters)s),
                   repeat('lorem ipsum dolor sit amet ', 2 + (random() * 30)::int), 'bench', '[]'::jsonb,
                   jsonb_build_array('cluster-' || (i %% %(clusters)s)), '',
                   l2_normalize(c.v + ARRAY(SELECT random_normal(0, 0.04) FROM generate_series(1, 384 + 0 * i))::vector(384)),
                   0.3 + 0.4 * random(), random() < 0.01,
                   now() - random() * interval '90 days', now() - random() * interval '90 days'
            FROM generate_series(0, %(nodes)s - 1) i
            JOIN bench_centroid c ON c.id = i %% %(clusters)s
            """,
            {"graph": graph.pk, "nodes": nodes, "clusters": clusters},
        )
        timings["nodes_s"] = time.perf_counter() - t

        t = time.perf_counter()
        cur.execute(
            """
            CREATE TEMP TABLE bench_idx AS
            SELECT substr(key, 2)::int AS i, id FROM graphadmin_node WHERE graph_id = %(graph)s;
            ALTER TABLE bench_idx ADD PRIMARY KEY (i);
            """.replace("%(graph)s", str(int(graph.pk)))
        )
        cur.execute(
            """
            INSERT INTO graphadmin_edge (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight,
                                         archived, created_at, updated_at)
            SELECT %(graph)s, s.id, t.id, (%(types)s::bigint[])[1 + floor(x.r3 * %(ntypes)s)::int],
                   power(random(), 0.7), 0.3 + 0.4 * random(), random() < 0.01, now(), now()
            FROM (
                SELECT floor(%(nodes)s * power(random(), 3))::int AS si, random() AS r1, random() AS r2, random() AS r3
                FROM generate_series(1, %(draws)s)
            ) x
            JOIN bench_idx s ON s.i = x.si
            JOIN bench_idx t ON t.i = CASE
                WHEN x.r1 < 0.7 THEN LEAST(%(nodes)s - 1,
                    %(clusters)s * floor(x.r2 * (%(nodes)s / %(clusters)s))::int + x.si %% %(clusters)s)
                ELSE floor(%(nodes)s * power(x.r2, 2))::int END
            WHERE s.id <> t.id
            ON CONFLICT DO NOTHING
            """,
            {"graph": graph.pk, "types": type_ids, "ntypes": len(type_ids), "nodes": nodes, "clusters": clusters,
             "draws": int(edges_target * 1.08)},
        )
        timings["edges_s"] = time.perf_counter() - t

        t = time.perf_counter()
        cur.execute(
            "CREATE INDEX node_embedding_hnsw ON graphadmin_node USING hnsw (embedding vector_cosine_ops) "
            "WITH (m = 16, ef_construction = 64)"
        )
        timings["hnsw_s"] = time.perf_counter() - t
        cur.execute("SET session_replication_role = DEFAULT")
        cur.execute("ANALYZE graphadmin_node")
        cur.execute("ANALYZE graphadmin_edge")
        cur.execute("SELECT count(*) FROM graphadmin_node WHERE graph_id = %s", [graph.pk])
        n_nodes = cur.fetchone()[0]
        cur.execute(
            "SELECT count(*), max(c) FROM (SELECT count(*) AS c FROM graphadmin_edge WHERE graph_id = %s GROUP BY source_id) x",
            [graph.pk],
        )
        _sources, max_out = cur.fetchone()
        cur.execute("SELECT count(*) FROM graphadmin_edge WHERE graph_id = %s", [graph.pk])
        n_edges = cur.fetchone()[0]
    return {"graph": graph.pk, "nodes": n_nodes, "edges": n_edges, "clusters": clusters, "topics": topics, "max_out_degree": max_out, **timings}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.05, help="Fraction of the full size (200k nodes, 1M edges).")
    parser.add_argument("--full", action="store_true", help="The full size (scale 1.0).")
    args = parser.parse_args(argv)
    scale = 1.0 if args.full else args.scale

    from bench.common import configure_environment, setup_django

    configure_environment()
    from django.conf import settings

    settings.DATABASES  # noqa: B018 - starts the embedded server if needed, before the bench database is dropped
    _drop_database()
    setup_django()
    t = time.perf_counter()
    info = generate(scale)
    info["total_s"] = time.perf_counter() - t
    print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()))


if __name__ == "__main__":
    main()
