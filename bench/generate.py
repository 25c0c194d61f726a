"""Generate a benchmark graph of realistic shape in the bench database, set-based in SQL.

    .venv/bin/python -m bench.generate                # scale 0.05: 10k nodes, ~50k edges (graph only;
                                                      # bench.run also adds history)
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
import json
import time
from datetime import UTC, datetime, timedelta

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
    from psycopg import sql

    from graphadmin.runtime.embedded_db import ensure_database

    db = ensure_database(settings.DATABASES["default"])
    # Never drop anything that is not obviously a bench database (BENCH_DATABASE is configurable).
    if "bench" not in BENCH_DATABASE or db["NAME"] != BENCH_DATABASE:
        raise SystemExit(f"Refusing to drop {db['NAME']!r}: not the bench database.")
    kwargs = {
        "host": db.get("HOST") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "port": db.get("PORT") or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**{k: v for k, v in kwargs.items() if v is not None}) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {name} WITH (FORCE)").format(name=sql.Identifier(BENCH_DATABASE)))


def generate(scale: float, seed: float = 0.42, progress=lambda message: None) -> dict:
    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from graphadmin import actions
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
        graph = actions.do_create_graph(
            org, "bench", "Benchmark graph", actor=user, edge_types={k: "" for k in EDGE_TYPES}
        )
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
        progress(f"  graph: {nodes:,} nodes in {clusters:,} clusters ({topics:,} topics), 384-dimension embeddings...")
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
            INSERT INTO graphadmin_node (graph_id, key, kind, title, text, source, aliases, tags, content_hash,
                embedding,
                                         feedback_weight, archived, created_at, updated_at)
            SELECT %(graph)s, 'n' || i, (ARRAY['note', 'decision', 'observation', 'research'])[1 + i %% 4],
                   'Node ' || i || ' of cluster ' || (i %% %(clusters)s),
                   repeat('lorem ipsum dolor sit amet ', 2 + (random() * 30)::int), 'bench', '[]'::jsonb,
                   jsonb_build_array('cluster-' || (i %% %(clusters)s)), '',
                   l2_normalize(c.v + ARRAY(SELECT random_normal(0, 0.04) FROM generate_series(1, 384 + 0 *
                       i))::vector(384)),
                   0.3 + 0.4 * random(), random() < 0.01,
                   now() - random() * interval '90 days', now() - random() * interval '90 days'
            FROM generate_series(0, %(nodes)s - 1) i
            JOIN bench_centroid c ON c.id = i %% %(clusters)s
            """,
            {"graph": graph.pk, "nodes": nodes, "clusters": clusters},
        )
        timings["nodes_s"] = time.perf_counter() - t

        t = time.perf_counter()
        progress(f"  graph: ~{edges_target:,} edges (power-law out-degrees, 6 edge types)...")
        cur.execute(
            """
            CREATE TEMP TABLE bench_idx AS
            SELECT substr(key, 2)::int AS i, id FROM graphadmin_node WHERE graph_id = %(graph)s
            """,
            {"graph": graph.pk},
        )
        cur.execute("ALTER TABLE bench_idx ADD PRIMARY KEY (i)")
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
            {
                "graph": graph.pk,
                "types": type_ids,
                "ntypes": len(type_ids),
                "nodes": nodes,
                "clusters": clusters,
                "draws": int(edges_target * 1.08),
            },
        )
        timings["edges_s"] = time.perf_counter() - t

        t = time.perf_counter()
        progress("  graph: building the HNSW index...")
        # The index exactly as the model (and so the migrations) define it.
        from graphadmin.models import Edge, Node

        hnsw = next(i for i in Node._meta.indexes if i.name == "node_embedding_hnsw")
        cur.execute(str(hnsw.create_sql(Node, connection.schema_editor())))
        timings["hnsw_s"] = time.perf_counter() - t

        # Triplet embeddings, which retrieval searches beside the nodes: the normalised sum of the two
        # ends' embeddings stands in for the embedded "source -> type -> target" text (same cluster
        # structure, no model needed), then their index as the model defines it.
        t = time.perf_counter()
        progress("  graph: triplet embeddings and their HNSW index...")
        cur.execute("DROP INDEX IF EXISTS edge_triplet_hnsw")
        cur.execute(
            """UPDATE graphadmin_edge e SET triplet_embedding = l2_normalize(s.embedding + t.embedding)
               FROM graphadmin_node s, graphadmin_node t
               WHERE e.graph_id = %(graph)s AND s.id = e.source_id AND t.id = e.target_id
                 AND s.graph_id = %(graph)s AND t.graph_id = %(graph)s""",
            {"graph": graph.pk},
        )
        triplet = next(i for i in Edge._meta.indexes if i.name == "edge_triplet_hnsw")
        cur.execute(str(triplet.create_sql(Edge, connection.schema_editor())))
        timings["triplet_hnsw_s"] = time.perf_counter() - t
        cur.execute("SET session_replication_role = DEFAULT")
        cur.execute("ANALYZE graphadmin_node")
        cur.execute("ANALYZE graphadmin_edge")
        cur.execute("SELECT count(*) FROM graphadmin_node WHERE graph_id = %s", [graph.pk])
        n_nodes = cur.fetchone()[0]
        cur.execute(
            "SELECT count(*), max(c) FROM (SELECT count(*) AS c FROM graphadmin_edge WHERE graph_id = %s GROUP "
            "BY source_id) x",
            [graph.pk],
        )
        _sources, max_out = cur.fetchone()
        cur.execute("SELECT count(*) FROM graphadmin_edge WHERE graph_id = %s", [graph.pk])
        n_edges = cur.fetchone()[0]
    return {
        "graph": graph.pk,
        "nodes": n_nodes,
        "edges": n_edges,
        "clusters": clusters,
        "topics": topics,
        "max_out_degree": max_out,
        **timings,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", type=float, default=0.05, help="Fraction of the full size (200k nodes, 1M edges).")
    parser.add_argument("--full", action="store_true", help="The full size (scale 1.0).")
    args = parser.parse_args(argv)
    scale = 1.0 if args.full else args.scale

    from bench.common import configure_environment, setup_django

    configure_environment()
    from graphadmin.runtime.embedded_db import ensure_database

    ensure_database()  # the embedded server, if that is the database, runs before the bench database is dropped
    _drop_database()
    setup_django()
    t = time.perf_counter()
    info = generate(scale)
    info["total_s"] = time.perf_counter() - t
    print(" ".join(f"{k}={v:.1f}" if isinstance(v, float) else f"{k}={v}" for k, v in info.items()))


if __name__ == "__main__":
    main()


FULL_SESSIONS = 50_000
FULL_BATCHES = 100_000
FULL_CHANGES = 10_000_000
CANDIDATES_PER_INJECTION = 20
HISTORY_DAYS = 180


def generate_history(graph_id: int, scale: float, progress=print) -> dict:
    """Months of feedback history, set-based: sessions, injections with their candidates, use events,
    update batches of every kind with their history, and one audit event per batch.

    At full scale: 50,000 sessions (one injection of 20 candidates each, 10 selected), 100,000
    batches and 10,000,000 weight changes over 180 days. Batch kinds follow a running graph:
    mostly reinforce and outcome batches of a few rows, weekly decay chunks of thousands (each over a
    contiguous id range), a few manual, normalize and rollback batches. As in the product, the small
    batches' changes are WeightChange rows and the bulk batches' (decay, normalize, rollback) are
    WeightChangeBlock arrays. The audit chain is computed in Python (the real
    ``audit.compute_hash``, so ``verify_audit`` holds) and loaded with one COPY.
    """
    from django.db import connection

    from feedback.retention import ensure_partitions
    from graphadmin.audit import GENESIS, advance_checkpoint, compute_hash

    # The weight history is partitioned by month: create the months the generated history spans.
    ensure_partitions(since=datetime.now(UTC) - timedelta(days=HISTORY_DAYS + 1))
    sessions = max(200, int(FULL_SESSIONS * scale))
    batches = max(200, int(FULL_BATCHES * scale))
    changes = max(20_000, int(FULL_CHANGES * scale))
    timings = {}
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute("SELECT organization_id FROM graphadmin_graph WHERE id = %s", [graph_id])
        org_id = cur.fetchone()[0]
        cur.execute(
            "SELECT id FROM graphadmin_policyrevision WHERE graph_id = %s ORDER BY revision DESC LIMIT 1", [graph_id]
        )
        revision_id = cur.fetchone()[0]
        cur.execute("DROP TABLE IF EXISTS bench_edge_idx")
        cur.execute(
            """CREATE TEMP TABLE bench_edge_idx AS
               SELECT (row_number() OVER (ORDER BY id))::int - 1 AS i, id, source_id, target_id FROM graphadmin_edge
               WHERE graph_id = %s AND NOT archived""",
            [graph_id],
        )
        cur.execute("ALTER TABLE bench_edge_idx ADD PRIMARY KEY (i)")
        cur.execute("SELECT count(*) FROM bench_edge_idx")
        n_edges = cur.fetchone()[0]

        t = time.perf_counter()
        progress(
            f"  history: {sessions:,} sessions with one injection of {CANDIDATES_PER_INJECTION} candidates each..."
        )
        cur.execute(
            """INSERT INTO feedback_agentsession (graph_id, external_id, started_at, outcome, outcome_at)
               SELECT %(g)s, 'hist-' || i, ts, o, CASE WHEN o IS NULL THEN NULL ELSE ts + interval '5 minutes' END
               FROM (SELECT i, now() - (%(days)s * (1 - i::float / %(n)s)) * interval '1 day' AS ts,
                            (ARRAY['accepted', 'accepted', 'accepted', 'rework', 'rejected', NULL])[1 +
                                floor(random() * 6)::int] AS o
                     FROM generate_series(1, %(n)s) i) x""",
            {"g": graph_id, "n": sessions, "days": HISTORY_DAYS},
        )
        cur.execute(
            """INSERT INTO feedback_contextinjection (graph_id, session_id, policy_revision_id, query, mode,
                budget_unit, budget,
                                                      spent, params, created_at)
               SELECT %(g)s, s.id, %(rev)s, 'question ' || s.external_id, 'retrieve', 'items', 10, 10, '{}'::jsonb,
                   s.started_at
               FROM feedback_agentsession s WHERE s.graph_id = %(g)s AND s.external_id LIKE 'hist-%%'""",
            {"g": graph_id, "rev": revision_id},
        )
        # Candidates: 20 random edges per injection (hubs' edges more often: power-law draw of the index).
        cur.execute(
            """INSERT INTO feedback_injectioncandidate (injection_id, graph_id, rank, selected, node_id, edge_id,
                hops, tokens, total,
                                                         features, components)
               SELECT j.id, %(g)s, r, r <= 10, e.target_id, e.id, 1, 40 + (random() * 200)::int, tot,
                      jsonb_build_object('node_id', e.target_id, 'vector', sim, 'path_weight', w,
                          'path', jsonb_build_array(e.id), 'entry', 'expansion', 'edge_id', e.id,
                          'source_id', e.source_id, 'target_id', e.target_id,
                          'hops', 1, 'weight', w, 'feedback_weight', fw,
                                         'similarity', sim, 'priority', 0.0, 'edge_type', 'related', 'tokens', 100,
                                             'cut', NULL),
                      jsonb_build_object(
                          'weight', jsonb_build_object('raw', 0.7 * w + 0.3 * fw, 'coefficient', 0.5,
                              'contribution', 0.5 * (0.7 * w + 0.3 * fw)),
                          'semantic', jsonb_build_object('raw', sim, 'coefficient', 0.35, 'contribution', 0.35 * sim),
                          'priority', jsonb_build_object('raw', 0.0, 'coefficient', 0.15, 'contribution', 0.0))
               FROM feedback_contextinjection j
               CROSS JOIN LATERAL (
                   SELECT r, floor(%(ne)s * power(random() + 0 * j.id, 2))::int AS ei, random() AS w, random() AS
                       fw, random() AS sim,
                          1.0 - r / 25.0 AS tot
                   FROM generate_series(1, %(k)s) r
               ) x
               JOIN bench_edge_idx e ON e.i = x.ei
               WHERE j.graph_id = %(g)s""",
            {"g": graph_id, "ne": n_edges, "k": CANDIDATES_PER_INJECTION},
        )
        cur.execute(
            """INSERT INTO feedback_useevent (graph_id, session_id, injection_id, signal, source, node_id, created_at)
               SELECT c.graph_id, j.session_id, j.id, CASE WHEN random() < 0.1 THEN 'negative' ELSE 'explicit' END,
                   'api',
                      c.node_id, j.created_at + interval '2 minutes'
               FROM feedback_injectioncandidate c JOIN feedback_contextinjection j ON j.id = c.injection_id
               WHERE c.graph_id = %(g)s AND c.selected AND c.rank <= 3""",
            {"g": graph_id},
        )
        timings["sessions_s"] = time.perf_counter() - t

        t = time.perf_counter()
        progress(f"  history: {batches:,} update batches, {changes:,} weight changes...")
        cur.execute(
            """CREATE TEMP TABLE bench_session_idx AS SELECT (row_number() OVER (ORDER BY id))::int - 1 AS i, id
               FROM feedback_agentsession WHERE graph_id = %s""",
            [graph_id],
        )
        cur.execute("ALTER TABLE bench_session_idx ADD PRIMARY KEY (i)")
        # Kinds by share of batches; sizes so the decay chunks carry most of the rows, as in a running graph.
        cur.execute(
            """INSERT INTO feedback_updatebatch (graph_id, kind, status, trigger_task, node_updates, edge_updates,
                conflicts, details,
                                                 started_at, finished_at, duration_ms, trigger_session_id)
               SELECT %(g)s, k, 'applied', CASE WHEN k IN ('decay', 'normalize') THEN 'task:feedback.decay' ELSE '' END,
                      0, 0, 0, '{}'::jsonb, ts, ts + interval '20 milliseconds', 20.0,
                      CASE WHEN k IN ('reinforce', 'outcome') THEN (SELECT id FROM bench_session_idx WHERE i = x.i
                          %% %(ns)s) END
               FROM (SELECT i, now() - (%(days)s * (1 - i::float / %(n)s)) * interval '1 day' AS ts,
                            CASE WHEN u < 0.45 THEN 'reinforce' WHEN u < 0.90 THEN 'outcome' WHEN u < 0.985 THEN 'decay'
                                 WHEN u < 0.992 THEN 'manual' WHEN u < 0.996 THEN 'normalize' ELSE 'rollback' END AS k
                     FROM (SELECT i, random() AS u FROM generate_series(1, %(n)s) i) r) x""",
            {"g": graph_id, "n": batches, "days": HISTORY_DAYS, "ns": sessions},
        )
        # Rows per batch: small for reinforce/outcome/manual, the rest split over decay/normalize/rollback.
        cur.execute(
            """CREATE TEMP TABLE bench_batch_size AS
               SELECT id, kind, started_at, CASE WHEN kind = 'reinforce' THEN 4 WHEN kind = 'outcome' THEN 20 WHEN
                   kind = 'manual' THEN 3 ELSE 0 END AS n
               FROM feedback_updatebatch WHERE graph_id = %(g)s""",
            {"g": graph_id},
        )
        cur.execute("SELECT coalesce(sum(n), 0), count(*) FILTER (WHERE n = 0) FROM bench_batch_size")
        small, bulk = cur.fetchone()
        per_bulk = max(1, (changes - int(small)) // max(1, bulk))
        cur.execute("UPDATE bench_batch_size SET n = %s WHERE n = 0", [per_bulk])
        cur.execute(
            """CREATE TEMP TABLE bench_changes AS
               SELECT b.id AS batch_id, b.kind, %(g)s::bigint AS graph_id,
                      CASE WHEN b.kind = 'outcome' AND x.r %% 2 = 0 THEN NULL ELSE e.id END AS edge_id,
                      CASE WHEN b.kind = 'outcome' AND x.r %% 2 = 0 THEN e.target_id END AS node_id,
                      CASE WHEN b.kind IN ('outcome') THEN 'feedback_weight' ELSE 'weight' END AS field,
                      x.before, CASE WHEN b.kind = 'decay' THEN greatest(0.1, x.before * 0.95) ELSE least(1.0,
                          x.before * 1.05) END AS after,
                      CASE b.kind WHEN 'reinforce' THEN 'explicit' WHEN 'outcome' THEN 'accepted' ELSE b.kind END AS
                          event,
                      b.started_at AS created_at
               FROM bench_batch_size b
               CROSS JOIN LATERAL (SELECT r, 0.2 + 0.6 * random() + 0 * b.id AS before,
                                          CASE WHEN b.kind IN ('decay', 'normalize', 'rollback')
                                               THEN (b.id * 7919) %% greatest(1, %(ne)s - b.n) + r - 1
                                               ELSE floor(%(ne)s * power(random(), 2))::int END AS ei
                                   FROM generate_series(1, b.n) r) x
               JOIN bench_edge_idx e ON e.i = x.ei""",
            {"g": graph_id, "ne": n_edges},
        )
        cur.execute(
            """INSERT INTO feedback_weightchange (batch_id, graph_id, edge_id, node_id, field, before, after, event,
                created_at)
               SELECT batch_id, graph_id, edge_id, node_id, field, before, after, event, created_at FROM bench_changes
               WHERE kind NOT IN ('decay', 'normalize', 'rollback')"""
        )
        cur.execute(
            """INSERT INTO feedback_weightchangeblock (batch_id, graph_id, target, field, event, created_at, id_min,
                id_max, size,
                                                       ids, before, after)
               SELECT batch_id, graph_id, 'edge', field, event, created_at, min(edge_id), max(edge_id), count(*),
                      array_agg(edge_id ORDER BY edge_id), array_agg(before ORDER BY edge_id), array_agg(after ORDER
                          BY edge_id)
               FROM bench_changes WHERE kind IN ('decay', 'normalize', 'rollback')
               GROUP BY batch_id, graph_id, field, event, created_at"""
        )
        cur.execute(
            """UPDATE feedback_updatebatch b SET node_updates = c.nodes, edge_updates = c.edges
               FROM (SELECT batch_id, count(node_id) AS nodes, count(edge_id) AS edges FROM bench_changes GROUP BY
                   batch_id) c
               WHERE c.batch_id = b.id"""
        )
        cur.execute("DROP TABLE bench_batch_size")
        cur.execute("DROP TABLE bench_changes")
        timings["changes_s"] = time.perf_counter() - t

        t = time.perf_counter()
        progress(f"  history: {batches:,} audit events (hash chain)...")
        cur.execute(
            """SELECT id, kind, started_at, node_updates, edge_updates FROM feedback_updatebatch WHERE graph_id = %s
               ORDER BY started_at, id""",
            [graph_id],
        )
        rows = cur.fetchall()
        cur.execute(
            "SELECT coalesce(max(seq), 0), (SELECT hash FROM graphadmin_auditevent WHERE organization_id = "
            "%(o)s ORDER BY seq DESC LIMIT 1) "
            "FROM graphadmin_auditevent WHERE organization_id = %(o)s",
            {"o": org_id},
        )
        seq, prev = cur.fetchone()
        prev = prev or GENESIS
        actions = {
            "reinforce": "graph.feedback",
            "outcome": "graph.feedback",
            "decay": "graph.decay",
            "normalize": "graph.normalize",
            "manual": "graph.weights.set",
            "rollback": "batch.rollback",
        }
        scope = {"graph": graph_id, "graph_slug": "bench"}
        with cur.cursor.copy(
            "COPY graphadmin_auditevent (organization_id, seq, created_at, actor, action, scope, payload, "
            "prev_hash, hash) "
            "FROM STDIN"
        ) as copy:
            for batch_id, kind, ts, nodes, edges in rows:
                seq += 1
                actor = "task:feedback.decay" if kind in ("decay", "normalize") else "task:feedback.apply_outcome"
                payload = {
                    "batch": batch_id,
                    "kind": kind,
                    "node_updates": nodes,
                    "edge_updates": edges,
                    "conflicts": 0,
                }
                h = compute_hash(prev, seq, ts, actor, actions[kind], scope, payload)
                copy.write_row((org_id, seq, ts, actor, actions[kind], json.dumps(scope), json.dumps(payload), prev, h))
                prev = h
        timings["audit_s"] = time.perf_counter() - t
    # What the hourly verify_audit_chains task does: walk the chain (it must hold: the generator wrote it
    # with the real hash function) and move the organization's checkpoint, so dashboard badges start there.
    t = time.perf_counter()
    verified = advance_checkpoint(org_id)
    if not verified.ok:
        raise RuntimeError(f"the generated audit chain does not verify: {verified.as_dict()}")
    timings["verify_s"] = time.perf_counter() - t
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = DEFAULT")
        for table in (
            "feedback_agentsession",
            "feedback_contextinjection",
            "feedback_injectioncandidate",
            "feedback_useevent",
            "feedback_updatebatch",
            "feedback_weightchange",
            "feedback_weightchangeblock",
            "graphadmin_auditevent",
        ):
            cur.execute(f"ANALYZE {table}")
        cur.execute(
            "SELECT (SELECT count(*) FROM feedback_weightchange WHERE graph_id = %(g)s)"
            " + (SELECT coalesce(sum(size), 0) FROM feedback_weightchangeblock WHERE graph_id = %(g)s)",
            {"g": graph_id},
        )
        n_changes = int(cur.fetchone()[0])
    # What the hourly metrics task does: today's rollup (the overview reads its node and edge totals).
    t = time.perf_counter()
    from feedback import metrics
    from graphadmin.models import Graph

    metrics.rollup(Graph.objects.get(pk=graph_id), datetime.now(UTC).date())
    timings["rollup_s"] = time.perf_counter() - t
    return {"sessions": sessions, "batches": batches, "weight_changes": n_changes, **timings}
