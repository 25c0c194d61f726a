"""The benchmark: one entry point. Generates a graph with months of history, then times every hot path
next to its raw-SQL floor, prints one table and writes it to docs/performance.md.

    make bench                      # scale 0.05: 10k nodes, ~50k edges, 500k weight changes (a few minutes)
    make bench SCALE=full           # 200k nodes, ~1M edges, 10M weight changes
    .venv/bin/python -m bench.run --scale 0.01 --iterations 3 --no-write    # smoke test (CI)

Everything runs in the bench database (``graphadmin_bench``, dropped and rebuilt each run; dev and
test data are never touched). Every path is run ``--iterations`` times after warm-up; the table
shows the median (p50) and p95 of those runs, the median of the floor measured in the same run on
the same kind of input, their ratio, the target and whether it is met.

Floors: rank and context: the same retrieval written as one raw SQL statement that also scores and
orders; hybrid search: the bare HNSW query; use and outcome feedback: the UPDATEs plus their history
INSERT (the least any rollback-capable design writes) on rows of the same size; decay: one raw
``UPDATE ... SET weight = greatest(floor, weight * rate)``; rollback: one raw UPDATE restoring the
batch's before values. Dashboard pages have no single-statement floor (a page is a dozen queries
and a template): their floor column is empty, their target is p95 < 300 ms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import statistics
import subprocess
import time
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

os.environ.setdefault("CONN_MAX_AGE", "600")
os.environ.setdefault("ALLOWED_HOSTS", "testserver,localhost")

from bench.common import ROOT, configure_environment, setup_django, summarize  # noqa: E402

PAGE_TARGET_MS = 300.0
API_TARGET_MS = 25.0

# ------------------------------------------------------------------------------------------------
# Dashboard pages: every named route of the apps' page_urlpatterns, with how to fill its URL.
# A new page: add its route name here (the smoke test fails while a route is missing from this map).
# Each entry: (method, kwargs from the bench's sample objects, POST data builder or None).
PAGES = {
    "overview": ("GET", lambda s: {}, None),
    "explain": ("GET", lambda s: {}, None),
    "injection": ("GET", lambda s: {"injection_id": s["injection"]}, None),
    "node": ("GET", lambda s: {"node_id": s["node"]}, None),
    "edge": ("GET", lambda s: {"edge_id": s["edge"]}, None),
    "batches": ("GET", lambda s: {}, None),
    "batch": ("GET", lambda s: {"batch_id": s["batch"]}, None),
    "audit": ("GET", lambda s: {}, None),
    "tune": ("GET", lambda s: {}, None),
    "tune-preview": ("POST", lambda s: {}, lambda s: s["tune_form"]),
    "impact": ("GET", lambda s: {}, None),
    "sessions": ("GET", lambda s: {}, None),
    "session": ("GET", lambda s: {"external_id": s["session"]}, None),
    "policy-effects": ("GET", lambda s: {}, None),
    "tune-restore-preview": ("GET", lambda s: {"revision": 1}, None),
    "graph-neighbourhood": ("GET", lambda s: {"node_id": s["node"]}, None),
    "injection-subgraph": ("GET", lambda s: {"injection_id": s["injection"]}, None),
    "members": ("GET", lambda s: {}, None),
    "export-vault": ("GET", lambda s: {}, None),
    "health": ("GET", lambda s: {}, None),
}
# Dashboard routes that are actions, not pages: timed through the action they call (rollback below; a
# restore is one policy write, graphadmin.actions.do_set_policy).
ACTIONS = {"dashboard-rollback", "dashboard-finish-rollback", "tune-restore", "tune-calibrate"}

# Floors of rank and context: the traversal written as one raw statement that also scores and
# orders (each level: every source's active out-edges to active targets, top %(cap)s by weight; the
# traversal score over the expanded edges, best first).
FLOOR_1HOP = """
WITH h1 AS (
    SELECT x.* FROM unnest(%(starts)s::bigint[]) s(id)
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
FROM h1 a
JOIN graphadmin_node t ON t.id = a.target_id
JOIN graphadmin_edgetype et ON et.id = a.edge_type_id
ORDER BY score DESC, a.id
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
),
h2 AS (
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

# Floor of the lexical step: the rows BM25 reads, unscored: the graph's node count and mean length, and
# every posting of the question's lexemes (with the node's length), common words included.
FLOOR_LEXICAL_STATS = """
SELECT count(*), avg(length) FROM graphadmin_nodelexicon WHERE graph_id = %(g)s
"""
FLOOR_LEXICAL = """
SELECT l.node_id, l.tf, d.length
FROM graphadmin_nodelexeme l
JOIN graphadmin_nodelexicon d ON d.node_id = l.node_id AND d.graph_id = %(g)s
WHERE l.graph_id = %(g)s AND l.lexeme = ANY(tsvector_to_array(to_tsvector('english', %(text)s)))
"""

# Floors of use and outcome feedback: the UPDATE of one weight column plus its history INSERT. The
# table, column and history column are identifiers; the rates and the field name bound values.
FLOOR_REINFORCE = """
WITH u AS (UPDATE {table} t SET {field} = t.{field} + %(lr)s * (1 - t.{field}) FROM {table} o
           WHERE t.id = o.id AND t.id = ANY(%(ids)s) RETURNING t.id, o.{field} AS before, t.{field} AS after)
INSERT INTO feedback_weightchange (batch_id, graph_id, {col}, field, before, after, event, created_at)
SELECT %(batch)s, %(g)s, id, %(field_name)s, before, after, 'bench', now() FROM u
"""
FLOOR_EMA = """
WITH u AS (UPDATE {table} t SET {field} = %(alpha)s * %(target)s + (1 - %(alpha)s) * t.{field} FROM {table} o
           WHERE t.id = o.id AND t.id = ANY(%(ids)s) RETURNING t.id, o.{field} AS before, t.{field} AS after)
INSERT INTO feedback_weightchange (batch_id, graph_id, {col}, field, before, after, event, created_at)
SELECT %(batch)s, %(g)s, id, %(field_name)s, before, after, 'bench', now() FROM u
"""
# Which weight column each floor moves: uses reinforce an edge's weight and a node's feedback
# weight; an outcome moves both feedback weights (EMA towards 1.0 for "accepted").
FLOOR_FIELDS = {
    "reinforce": (FLOOR_REINFORCE, {"edge": "weight", "node": "feedback_weight"}, {"lr": 0.1}),
    "ema": (FLOOR_EMA, {"edge": "feedback_weight", "node": "feedback_weight"}, {"alpha": 0.1, "target": 1.0}),
}


@dataclass
class Row:
    """One line of the table. ``unit`` is ms unless stated (recall rows carry a fraction)."""

    path: str
    p50: float
    p95: float
    floor: float | None
    target: str
    met: bool | None
    unit: str = "ms"

    @property
    def ratio(self) -> float | None:
        return None if not self.floor or self.unit != "ms" else self.p50 / self.floor


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
def timed(samples: list, keep: bool = True):
    t = time.perf_counter()
    yield
    if keep:
        samples.append((time.perf_counter() - t) * 1000.0)


def _unit(v):
    n = math.sqrt(sum(x * x for x in v))
    return [x / n for x in v]


def machine() -> dict:
    """Cores, memory, CPU model and PostgreSQL version of the machine the run is on."""
    from django.db import connection

    cpu = platform.processor() or ""
    try:
        with open("/proc/cpuinfo") as fh:
            cpu = next((line.split(":", 1)[1].strip() for line in fh if line.startswith("model name")), cpu)
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as fh:
            kb = int(next(line.split()[1] for line in fh if line.startswith("MemTotal")))
            mem = f"{kb / 1024 / 1024:.1f} GiB"
    except (OSError, StopIteration):
        pass
    with connection.cursor() as cur:
        cur.execute("SHOW server_version")
        pg = cur.fetchone()[0]
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cur.fetchone()
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        commit = ""
    return {
        "cores": os.cpu_count(),
        "memory": mem,
        "cpu": cpu,
        "postgresql": pg,
        "pgvector": row[0] if row else "",
        "python": platform.python_version(),
        "commit": commit,
    }


# ------------------------------------------------------------------------------------------------
# The measurements


class Bench:
    def __init__(self, graph_id: int, iterations: int, seed: int = 7, log=print):
        from django.contrib.auth import get_user_model
        from django.db import connection
        from rest_framework.test import APIClient

        from graphadmin.models import Graph
        from ranking.retrieval import policy_of

        self.log = log
        self.rnd = random.Random(seed)
        self.n = iterations
        self.warm = max(2, min(10, iterations // 5))
        self.graph = Graph.objects.select_related("organization").get(pk=graph_id)
        self.user = get_user_model().objects.get(username="bench")
        self.client = APIClient()
        self.client.force_authenticate(self.user)
        revision, policy = policy_of(self.graph)
        self.policy_row = revision
        self.cap = revision.fanout_cap
        self.coefs = {
            "cw": policy.coef_weight,
            "cs": policy.coef_semantic,
            "cp": policy.coef_priority,
            "fi": policy.feedback_influence,
        }
        self.rows: list[Row] = []
        g = self.graph.pk
        with connection.cursor() as cur:
            cur.execute(
                """SELECT e.source_id, count(*) FROM graphadmin_edge e JOIN graphadmin_node n ON n.id = e.source_id
                    AND NOT n.archived
                   JOIN graphadmin_node t ON t.id = e.target_id AND NOT t.archived
                   WHERE e.graph_id = %s AND NOT e.archived GROUP BY e.source_id""",
                [g],
            )
            degrees = cur.fetchall()
            cur.execute(
                "SELECT embedding::text FROM graphadmin_node WHERE graph_id = %s AND NOT archived ORDER BY "
                "random() LIMIT 300",
                [g],
            )
            self.seeds = [json.loads(r[0]) for r in cur.fetchall()]
        self.hubs = [s for s, d in degrees if d >= self.cap] or [
            s for s, _d in sorted(degrees, key=lambda x: -x[1])[:20]
        ]
        self.mids = [s for s, d in degrees if 5 <= d < self.cap] or self.hubs
        self.active = [s for s, _d in degrees]

    def query(self):
        return _unit([x + self.rnd.gauss(0, 0.03) for x in self.rnd.choice(self.seeds)])

    def question_text(self) -> str:
        """A question's words on the bench graph's vocabulary (bench/generate.py: 'Node i of cluster c',
        lorem ipsum): words in every node (scanned for their df, then left out), a cluster number
        (in about one node in `clusters`) and a node number (rare)."""
        i = self.rnd.randrange(len(self.active))
        return f"what does the lorem note say about node {i} in cluster {self.rnd.randrange(100)}?"

    def lexical(self):
        """The lexical step alone: BM25 top 50 for a question's words, against FLOOR_LEXICAL."""
        from django.db import connection

        from bench import reference_sql as ref

        floor, lex = [], []
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            text = self.question_text()
            with timed(lex, keep):
                ref.lexical_hits(self.graph.pk, text, "english", 50)
            with connection.cursor() as cur, timed(floor, keep):
                cur.execute(FLOOR_LEXICAL_STATS, {"g": self.graph.pk})
                cur.fetchall()
                cur.execute(FLOOR_LEXICAL, {"g": self.graph.pk, "text": text})
                cur.fetchall()
        self.add("lexical step: BM25 top 50 of a question's words", lex, floor, ratio_max=2.0)

    def add(self, path, samples, floor_samples, target_ms=None, ratio_max=None, target=None):
        s = summarize(samples)
        f = summarize(floor_samples)["median"] if floor_samples else None
        met = True
        parts = []
        if target_ms is not None:
            parts.append(f"p95 <= {target_ms:g} ms")
            met = met and s["p95"] <= target_ms
        if ratio_max is not None:
            parts.append(f"<= {ratio_max:g}x floor")
            met = met and f is not None and s["median"] <= ratio_max * f
        row = Row(path, s["median"], s["p95"], f, target or "; ".join(parts) or "-", met if parts else None)
        self.rows.append(row)
        self.log(f"  {path}: p50 {row.p50:.2f} ms, p95 {row.p95:.2f} ms" + (f", floor {f:.2f} ms" if f else ""))
        return row

    # -- embeddings ------------------------------------------------------------------------------

    def embeddings(self):
        """Query embedding on the request path (uncached and cached) and import embedding of the demo vault.

        Uncached: a new one-sentence question per run, straight to the configured embedder (target p50
        <= 10 ms on 2 cores); cached: a repeated question through ``embed_query``. Import: every text an
        import of demo/vault embeds (each note's title and text, each link's triplet), in
        EMBED_BATCH_SIZE batches, as texts per second.
        """
        from django.conf import settings

        from feedback.harness.demo import DEMO_VAULT
        from graphadmin.embeddings import _queries, embed_query, get_embedder
        from graphadmin.vault.parse import parse_vault
        from graphadmin.vault.plan import node_embedding_text, triplet_text

        embedder = get_embedder()
        subjects = [
            "edges",
            "the parcel tracker",
            "the carrier webhook",
            "decay",
            "the ranking policy",
            "label printing",
            "the scanner app",
            "address validation",
            "the retry queue",
            "customs forms",
        ]
        verbs = ["get ranked", "fail at night", "handle a duplicate scan", "get rolled back", "talk to the warehouse"]
        questions = [f"How does {s} {v} when the budget runs out?" for s in subjects for v in verbs]
        self.rnd.shuffle(questions)
        uncached, cached = [], []
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            with timed(uncached, keep):
                embedder.embed([questions[it % len(questions)] + f" ({it})"])
        _queries.clear()
        embed_query(questions[0])
        for it in range(self.n + self.warm):
            with timed(cached, it >= self.warm):
                embed_query(questions[0])
        self.add(
            f"query embedding, one sentence, uncached ({embedder.model_name})", uncached, [], target="p50 <= 10 ms"
        ).met = summarize(uncached)["median"] <= 10.0
        self.add("query embedding, repeated query (LRU cache)", cached, [])

        parsed = parse_vault(DEMO_VAULT)
        texts = [node_embedding_text(n.title, n.text) for n in parsed.notes.values()]
        titles = {k: n.title for k, n in parsed.notes.items()}
        texts += [triplet_text(titles[link.source], link.edge_type, titles[link.target]) for link in parsed.links]
        size = settings.EMBED_BATCH_SIZE
        rates = []
        for _round in range(3):
            t = time.perf_counter()
            for i in range(0, len(texts), size):
                embedder.embed(texts[i : i + size])
            rates.append(len(texts) / (time.perf_counter() - t))
        self.rows.append(
            Row(
                f"import embedding, demo vault ({len(parsed.notes)} notes + {len(parsed.links)} triplets)",
                statistics.median(rates),
                min(rates),
                None,
                "reported (no target)",
                None,
                unit="texts/s",
            )
        )
        self.log(f"  import embedding: {statistics.median(rates):.0f} texts/s (slowest of 3 rounds {min(rates):.0f})")

    # -- ranking ---------------------------------------------------------------------------------

    def rank(self, name, starts_fn, hops):
        from django.db import connection

        from graphadmin_client import RetrievalRequest
        from ranking import queries as sql
        from ranking.retrieval import prepare, rank

        floor, dbw, api = [], [], []
        floor_sql = FLOOR_1HOP if hops == 1 else FLOOR_2HOP
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            starts, q = starts_fn(), self.query()
            params = {"g": self.graph.pk, "starts": starts, "cap": self.cap, "q": sql.vector_literal(q), **self.coefs}
            with connection.cursor() as cur:  # untimed: every method then meets warm buffers
                cur.execute(floor_sql, params)
                cur.fetchall()
            with connection.cursor() as cur, timed(floor, keep):
                cur.execute(floor_sql, params)
                cur.fetchall()
            timer = DBTimer()
            with connection.execute_wrapper(timer):
                rank(prepare(self.graph, RetrievalRequest(start_nodes=starts, vector=q, k=50, hops=hops)))
            if keep:
                dbw.append(timer.seconds * 1000.0)
            with timed(api, keep):
                r = self.client.post(
                    f"/api/graphs/{self.graph.pk}/rank/",
                    {"start_nodes": starts, "vector": q, "k": 50, "hops": hops},
                    format="json",
                )
            assert r.status_code == 200, r.content
        self.add(f"{name}: API", api, floor, target_ms=API_TARGET_MS)
        self.add(f"{name}: database work", dbw, floor, ratio_max=2.0)

    def search(self):
        from django.db import connection, transaction

        from bench import reference_sql as ref
        from ranking import queries as sql

        floor, vec, api, recalls = [], [], [], []
        ef = str(sql.ef_search_for(50))
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            q = self.query()
            p = {"g": self.graph.pk, "q": sql.vector_literal(q), "k": 50}
            for samples in ([], floor):
                with transaction.atomic(), connection.cursor() as cur, timed(samples, keep):
                    cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [ef])
                    cur.execute(FLOOR_VECTOR, p)
                    cur.fetchall()
            with timed(vec, keep):
                hits = ref.vector_candidates(self.graph.pk, q, 50)
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute("SET LOCAL enable_indexscan = off")
                cur.execute(FLOOR_VECTOR, p)
                exact = {r[0] for r in cur.fetchall()}
            if keep:
                recalls.append(len(exact & {h.node_id for h in hits}) / max(1, len(exact)))
            anchors = self.rnd.sample(self.active, 2)
            with timed(api, keep):
                r = self.client.post(
                    f"/api/graphs/{self.graph.pk}/search/", {"vector": q, "k": 50, "anchors": anchors}, format="json"
                )
            assert r.status_code == 200, r.content
        self.add("hybrid search k=50, 2 anchors: API", api, floor, target_ms=API_TARGET_MS)
        self.add("hybrid search: vector step", vec, floor, target_ms=10.0)
        mean = sum(recalls) / len(recalls)
        ordered = sorted(recalls)
        self.rows.append(
            Row(
                "hybrid search: recall@50 vs exact (mean, p5)",
                mean,
                ordered[len(ordered) // 20],
                None,
                "mean >= 0.95",
                mean >= 0.95,
                unit="recall",
            )
        )
        self.log(f"  recall@50: mean {mean:.3f}, p5 {ordered[len(ordered) // 20]:.2f}")

    def context(self):
        from django.db import connection

        from ranking import queries as sql

        floor, api = [], []
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            starts, q = self.rnd.sample(self.hubs, min(10, len(self.hubs))), self.query()
            params = {"g": self.graph.pk, "starts": starts, "cap": self.cap, "q": sql.vector_literal(q), **self.coefs}
            with connection.cursor() as cur:
                cur.execute(FLOOR_1HOP, params)
                cur.fetchall()
            with connection.cursor() as cur, timed(floor, keep):
                cur.execute(FLOOR_1HOP, params)
                cur.fetchall()
            with timed(api, keep):
                r = self.client.post(
                    f"/api/graphs/{self.graph.pk}/context/",
                    {
                        "session": f"bench-ctx-{it}-{self.rnd.random()}",
                        "vector": q,
                        "start_nodes": starts,
                        "budget_unit": "tokens",
                        "budget": 2000,
                        "hops": 1,
                    },
                    format="json",
                )
            assert r.status_code == 201, r.content
        self.add(
            "context assembly, 10 starts (500 candidates), 2000 tokens: API",
            api,
            floor,
            target_ms=100.0,
            target="p95 <= 100 ms (set here; no target in the issues)",
        )
        self.rows[-1].met = self.rows[-1].p95 <= 100.0

    def context_question(self):
        """context the way agents call it: the question only (its words, and its vector given, so the query
        embedding, timed separately, is not in these figures). Database work: the pipeline's reads and
        writes, timed per statement (the candidates' COPY is not seen by the timer, so it is left out of
        both sides). Floor: the same reads as bare SQL: node top 50, triplet top 50, the lexical step's
        floor, one 2-hop expansion from the 10 best hits and the similar-retrieval count, plus the
        injection row."""
        from django.db import connection, transaction

        from bench import reference_sql as ref
        from graphadmin_client import RetrievalRequest
        from ranking import queries as sql
        from ranking.context import assemble_context
        from ranking.retrieval import EXPANSION_FANOUT, TRIPLET_K, prepare

        floor, dbw, api = [], [], []
        ef = str(sql.ef_search_for(50))
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            q, text = self.query(), self.question_text()
            qv = sql.vector_literal(q)
            timer = DBTimer()
            with connection.execute_wrapper(timer):
                req = RetrievalRequest(session=f"bench-q-{it}-{self.rnd.random()}", vector=q, query=text)
                done = assemble_context(prepare(self.graph, req))
            body = {"injection": done.injection.pk, "considered": done.considered}
            if keep:
                dbw.append(timer.seconds * 1000.0)
            with timed(api, keep):
                r = self.client.post(
                    f"/api/graphs/{self.graph.pk}/context/",
                    {"session": f"bench-q2-{it}-{self.rnd.random()}", "vector": q, "query": text},
                    format="json",
                )
            assert r.status_code == 201, r.content
            with transaction.atomic(), connection.cursor() as cur, timed(floor, keep):
                cur.execute("SELECT set_config('hnsw.ef_search', %s, true)", [ef])
                cur.execute(FLOOR_VECTOR, {"g": self.graph.pk, "q": qv, "k": 50})
                hits = [row[0] for row in cur.fetchall()]
                cur.execute(
                    """SELECT id FROM graphadmin_edge WHERE graph_id = %(g)s AND NOT archived AND triplet_embedding
                        IS NOT NULL
                               ORDER BY triplet_embedding <=> %(q)s::vector LIMIT %(k)s""",
                    {"g": self.graph.pk, "q": qv, "k": TRIPLET_K},
                )
                cur.fetchall()
                cur.execute(FLOOR_LEXICAL_STATS, {"g": self.graph.pk})
                cur.fetchall()
                cur.execute(FLOOR_LEXICAL, {"g": self.graph.pk, "text": text})
                cur.fetchall()
                cur.execute(
                    FLOOR_2HOP,
                    {
                        "g": self.graph.pk,
                        "starts": hits[:10],
                        "cap": min(self.cap, EXPANSION_FANOUT),
                        "q": qv,
                        **self.coefs,
                    },
                )
                cur.fetchall()
                cur.execute(
                    ref.QUESTION_EVIDENCE_SQL,
                    {
                        "graph": self.graph.pk,
                        "query": qv,
                        "n": sql.SIMILAR_QUESTIONS,
                        "kind": sql.QUESTION_KIND,
                        "answered": sql.ANSWERED,
                        "model": "",
                        "min_similarity": sql.POSITIVE_SIMILARITY,
                    },
                )
                cur.fetchall()
                cur.execute(
                    """INSERT INTO feedback_contextinjection (graph_id, session_id, policy_revision_id, query, mode,
                        budget_unit,
                               budget, spent, params, query_embedding, created_at)
                               SELECT graph_id, session_id, policy_revision_id, '', 'retrieve', 'items', 10, 10,
                                   '{}', %(q)s::vector, now()
                               FROM feedback_contextinjection WHERE id = %(i)s RETURNING id""",
                    {"q": qv, "i": body["injection"]},
                )
                cur.fetchone()
                transaction.set_rollback(True)
        self.add("context, question only (words, vector given): API", api, floor, target_ms=25.0)
        self.add("context, question only: database work", dbw, floor, ratio_max=2.0)

    # -- feedback --------------------------------------------------------------------------------

    def _sessions(self, count: int, size: int):
        """``count`` sessions, each with one injection selecting ``size`` random edges (and their targets)."""
        from django.db import connection

        from feedback.models import AgentSession, ContextInjection

        with connection.cursor() as cur:
            cur.execute(
                """SELECT e.id, e.target_id FROM graphadmin_edge e JOIN graphadmin_node t ON t.id = e.target_id AND
                    NOT t.archived
                           WHERE e.graph_id = %s AND NOT e.archived ORDER BY random() LIMIT %s""",
                [self.graph.pk, max(size * 4, 2000)],
            )
            pool = cur.fetchall()
        out = []
        for i in range(count):
            chosen = self.rnd.sample(pool, size)
            session = AgentSession.objects.create(graph=self.graph, external_id=f"bench-fb-{i}-{self.rnd.random()}")
            inj = ContextInjection.objects.create(
                graph=self.graph, session=session, policy_revision=self.policy_row, query="bench"
            )
            with connection.cursor() as cur:
                cur.execute(
                    """INSERT INTO feedback_injectioncandidate (injection_id, graph_id, rank, selected, node_id,
                        edge_id, hops, tokens,
                                                               total, features, components)
                       SELECT %s, %s, r, true, t, e, 1, 10, 0.5,
                              jsonb_build_object('edge_id', d.id, 'source_id', d.source_id, 'target_id',
                                  d.target_id, 'hops', 1,
                                                 'weight', d.weight, 'feedback_weight', d.feedback_weight,
                                                     'similarity', 0.5,
                                                 'priority', et.priority, 'edge_type', et.name, 'tokens', 10, 'cut',
                                                     NULL),
                              jsonb_build_object('weight', jsonb_build_object('raw', d.weight, 'coefficient', 0.5,
                                  'contribution', 0.5 * d.weight))
                       FROM unnest(%s::bigint[], %s::bigint[]) WITH ORDINALITY AS x(e, t, r)
                       JOIN graphadmin_edge d ON d.id = x.e JOIN graphadmin_edgetype et ON et.id = d.edge_type_id""",
                    [inj.pk, self.graph.pk, [e for e, _ in chosen], [t for _, t in chosen]],
                )
            out.append((session, [e for e, _ in chosen], sorted({t for _, t in chosen})))
        return out

    def _history_floor(self, edges, nodes, kind: str):
        from django.db import connection, transaction
        from psycopg import sql

        from feedback.models import UpdateBatch

        text, fields, rates = FLOOR_FIELDS[kind]
        batch = UpdateBatch.objects.create(graph=self.graph, kind="manual", started_at=datetime.now(UTC))
        t = time.perf_counter()
        with transaction.atomic(), connection.cursor() as cur:
            for table, col, ids, field in (
                ("graphadmin_edge", "edge_id", edges, fields["edge"]),
                ("graphadmin_node", "node_id", nodes, fields["node"]),
            ):
                if ids:
                    statement = sql.SQL(text).format(
                        table=sql.Identifier(table), field=sql.Identifier(field), col=sql.Identifier(col)
                    )
                    cur.execute(
                        statement.as_string(),
                        {"ids": ids, "batch": batch.pk, "g": self.graph.pk, "field_name": field, **rates},
                    )
        return (time.perf_counter() - t) * 1000.0

    def _feedback_path(self, name: str, size: int, act, floor_slice: int, floor_kind: str, target: str | None = None):
        """Time ``act(session, edges, nodes)`` on fresh sessions of ``size`` selected edges, and the history
        floor on another session's rows of the same size (so both write real changes)."""
        picks = self._sessions(2 * (self.n + self.warm), size)
        action, floor = [], []
        for it in range(self.n + self.warm):
            keep = it >= self.warm
            with timed(action, keep):
                act(*picks[2 * it])
            _s, f_edges, f_nodes = picks[2 * it + 1]
            ms = self._history_floor(f_edges[:floor_slice], f_nodes[:floor_slice], floor_kind)
            if keep:
                floor.append(ms)
        self.add(name, action, floor, target_ms=API_TARGET_MS, ratio_max=1.5, target=target)

    def uses(self):
        from feedback import actions

        def act(session, edges, nodes):
            items = [actions.UseItem("edge", e, "explicit") for e in edges[:5]] + [
                actions.UseItem("node", n, "explicit") for n in nodes[:5]
            ]
            actions.do_record_uses(session, items, actor="bench")

        self._feedback_path(
            "use feedback, 10 items (apply_uses action)",
            10,
            act,
            5,
            "reinforce",
            target="p95 <= 25 ms; <= 1.5x floor (outcome's targets, applied to uses)",
        )

    def outcome(self):
        from feedback import actions

        def act(session, _edges, _nodes):
            actions.do_apply_outcome(self.graph, session.external_id, "accepted", actor="bench")

        self._feedback_path(
            "outcome feedback, 100 edges + targets (apply_outcome action)",
            100,
            act,
            100,
            "ema",
        )

    def decay_and_rollback(self, rounds: int):
        from django.db import connection, transaction

        from feedback import actions
        from feedback.models import UpdateBatch
        from feedback.queries import weights

        policy = self.graph.current_policy()
        rate, floor_w = policy.decay_rate, policy.weight_floor
        g = self.graph.pk
        action, raw, block_bytes = [], [], []
        start = datetime.now(UTC) + timedelta(days=14)
        edges = 0
        for r in range(max(rounds, 7)):  # decay rounds are short: a few more of them steady the median
            now = start + timedelta(days=7 * r)
            _period, _start, cutoff = weights.decay_period(self.graph, now)
            _vacuum_edges()
            t = time.perf_counter()
            with transaction.atomic(), connection.cursor() as cur:
                # The same edges the action decays (live, above the floor, not traversed since the cutoff).
                cur.execute(
                    """UPDATE graphadmin_edge e SET weight = greatest(%(floor)s, weight * %(rate)s)
                               WHERE graph_id = %(g)s AND NOT archived AND weight > %(floor)s AND created_at <
                                   %(cutoff)s
                                 AND NOT EXISTS (SELECT 1 FROM graphadmin_edgestats s WHERE s.edge_id = e.id AND
                                     s.last_traversed_at >= %(cutoff)s)""",
                    {"floor": floor_w, "rate": rate, "g": g, "cutoff": cutoff},
                )
                transaction.set_rollback(True)  # measure only: the action below must start from the same weights
            raw.append((time.perf_counter() - t) * 1000.0)
            size_before = _history_bytes("feedback_weightchangeblock")
            _vacuum_edges()
            t = time.perf_counter()
            result = actions.do_decay(self.graph, actor="bench", now=now)
            action.append((time.perf_counter() - t) * 1000.0)
            edges = result.edge_updates
            block_bytes.append((_history_bytes("feedback_weightchangeblock") - size_before) / max(edges, 1))
            self.log(
                f"  decay round {r + 1}: {edges:,} edges in {action[-1] / 1000:.2f} s (raw UPDATE "
                f"{raw[-1] / 1000:.2f} s), "
                f"{block_bytes[-1]:.1f} bytes of history per edge"
            )
        self.add(f"decay, all edges ({edges:,}), chunked", action, raw, ratio_max=1.5)
        with connection.cursor() as cur:
            cur.execute("SELECT count(*) FROM feedback_weightchange")
            rows = cur.fetchone()[0]
        row_bytes = _history_bytes("feedback_weightchange") / rows if rows else None
        self.rows.append(
            Row(
                "decay history, bytes per decayed edge (blocks, with indexes and TOAST)",
                statistics.median(block_bytes),
                max(block_bytes),
                row_bytes,
                "reported (no target)",
                None,
                unit="bytes",
            )
        )
        self.log(
            f"  history: {self.rows[-1].p50:.1f} bytes per decayed edge in blocks; {row_bytes or 0:.1f} bytes "
            "per change as rows"
        )

        # Rollback of a batch that changed every edge (a normalize batch), against one raw restoring UPDATE.
        rb, rb_floor = [], []
        for r in range(rounds):
            with connection.cursor() as cur:
                cur.execute(
                    "UPDATE graphadmin_edge SET weight = weight * 0.9 WHERE graph_id = %s", [g]
                )  # normalize has work
            normalized = actions.do_normalize(self.graph, actor="bench", chunk_size=10**12)
            batch = UpdateBatch.objects.get(pk=normalized.batch_id)
            _vacuum_edges()
            t = time.perf_counter()
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(
                    """UPDATE graphadmin_edge e SET weight = h.before FROM feedback_weighthistory h
                               WHERE h.batch_id = %s AND h.edge_id = e.id AND h.field = 'weight' AND e.weight =
                                   h.after""",
                    [batch.pk],
                )
                transaction.set_rollback(True)  # the floor only measures; the action below does the real rollback
            rb_floor.append((time.perf_counter() - t) * 1000.0)
            _vacuum_edges()
            t = time.perf_counter()
            done = actions.do_rollback_batch(batch, actor="bench")
            rb.append((time.perf_counter() - t) * 1000.0)
            self.log(f"  rollback {r + 1}/{rounds}: {done.edge_updates:,} restored in {rb[-1] / 1000:.2f} s")
        n = normalized.edge_updates
        target_ms = 30_000.0 * max(n, 1) / 1_000_000
        self.add(
            f"rollback of a {n:,}-change batch",
            rb,
            rb_floor,
            target=f"<= 30 s per 1M changes ({target_ms / 1000:.1f} s)",
        )
        self.rows[-1].met = self.rows[-1].p95 <= target_ms

    # -- dashboard -------------------------------------------------------------------------------

    def pages(self, iterations: int):
        from django.contrib.auth import get_user_model
        from django.test import Client
        from django.urls import reverse

        from feedback.models import ContextInjection, UpdateBatch
        from graphadmin.models import Edge, EdgeType, Membership, Node
        from graphadmin.views import _initial

        User = get_user_model()
        # An admin: every page, the members page and the operators' vault export included.
        member, _ = User.objects.get_or_create(username="bench-admin")
        Membership.objects.update_or_create(
            user=member, organization=self.graph.organization, defaults={"role": "admin"}
        )
        client = Client()
        client.force_login(member)
        g = self.graph
        if g.current_policy().revision == 1:
            # A second revision, so restoring r1 has a difference to show and its what-if replay to run
            # (as on a graph whose policy was ever changed), and the per-revision effects two rows.
            from graphadmin.actions import do_set_policy

            do_set_policy(g, {"coef_vector": 0.65}, actor=member, note="bench: a revision to restore r1 from")
        hub = Node.objects.get(pk=self.hubs[0])
        latest = ContextInjection.objects.filter(graph=g).select_related("session").order_by("-id").first()
        samples = {
            "injection": latest.pk,
            "session": latest.session.external_id,
            "node": hub.pk,
            "edge": Edge.objects.filter(graph=g, source=hub, archived=False)
            .order_by("-weight")
            .values_list("id", flat=True)
            .first(),
            "batch": UpdateBatch.objects.filter(graph=g, kind="outcome")
            .order_by("-id")
            .values_list("id", flat=True)
            .first(),
            "tune_form": {
                k: v
                for k, v in _initial(
                    g.current_policy(), list(EdgeType.objects.filter(graph=g).order_by("name"))
                ).items()
            },
        }
        for name, (method, kwargs_fn, data_fn) in PAGES.items():
            url = reverse(name, kwargs={"graph_id": g.pk, **kwargs_fn(samples)})
            times = []
            for it in range(iterations + 2):
                with timed(times, it >= 2):
                    r = client.post(url, data_fn(samples)) if method == "POST" else client.get(url)
                assert r.status_code == 200, (name, url, r.status_code)
            self.add(
                f"dashboard: {name} ({method} {url.replace(str(g.pk), '<g>', 1)})",
                times,
                None,
                target_ms=PAGE_TARGET_MS,
            )


# ------------------------------------------------------------------------------------------------
# Rendering


def _history_bytes(parent: str) -> int:
    """Bytes on disk of a partitioned history table: every partition with its indexes and TOAST."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(
            "SELECT coalesce(sum(pg_total_relation_size(inhrelid)), 0) FROM pg_inherits WHERE inhparent = %s::regclass",
            [parent],
        )
        return int(cur.fetchone()[0])


def _vacuum_edges() -> None:
    """Before each timed bulk statement (floor or action): clear the dead row versions the previous
    one left, so neither pays for the other's churn (in production autovacuum does this between
    runs; here the runs follow each other within seconds)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM graphadmin_edge")


def vacuum_database() -> None:
    """VACUUM (ANALYZE) the freshly generated database: the bulk loads would otherwise wake autovacuum
    in the middle of the timed runs (seen: a worker vacuuming the 10M-row history during the ranking
    measurements)."""
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("VACUUM (ANALYZE)")


def render_table(rows: list[Row]) -> str:
    lines = ["| path | p50 | p95 | floor (p50) | ratio | target | met |", "|---|---:|---:|---:|---:|---|---|"]
    for r in rows:
        if r.unit == "recall":
            p50, p95, floor, ratio = f"{r.p50:.3f}", f"p5 {r.p95:.2f}", "exact search", ""
        elif r.unit == "texts/s":  # p95 column: the slowest round
            p50, p95, floor, ratio = f"{r.p50:.0f} texts/s", f"slowest {r.p95:.0f}", "", ""
        elif r.unit == "bytes":  # p95 column: the largest round; floor column: the row format's bytes per change
            p50, p95, ratio = f"{r.p50:.1f} B", f"{r.p95:.1f} B", ""
            floor = "" if r.floor is None else f"as rows: {r.floor:.1f} B"
        else:
            p50, p95 = _ms(r.p50), _ms(r.p95)
            floor = "" if r.floor is None else _ms(r.floor)
            ratio = "" if r.ratio is None else f"{r.ratio:.2f}x"
        met = "" if r.met is None else ("yes" if r.met else "**no**")
        lines.append(f"| {r.path} | {p50} | {p95} | {floor} | {ratio} | {r.target} | {met} |")
    return "\n".join(lines)


def _ms(v: float) -> str:
    return f"{v / 1000:.2f} s" if v >= 1000 else f"{v:.2f} ms"


def write_docs(section: str, label: str, path=None) -> None:
    """Replace this scale's generated section of docs/performance.md (between its markers).

    Each scale (``default``, ``full``, or another fraction) keeps its own section, so the default and
    the full-scale tables stand side by side; a new scale's section goes after the title, before the prose.
    """
    path = path or ROOT / "docs" / "performance.md"
    text = path.read_text()
    start, end = f"<!-- bench:{label}:start -->", f"<!-- bench:{label}:end -->"
    block = f"{start}\n{section}\n{end}"
    if start in text:
        text = re.sub(re.escape(start) + r".*?" + re.escape(end), lambda _m: block, text, flags=re.S)
    else:
        head, _, rest = text.partition("\n")
        text = f"{head}\n\n{block}\n{rest}"
    path.write_text(text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scale", default="0.05", help="Fraction of the full size, or 'full' (1.0).")
    parser.add_argument(
        "--iterations", type=int, default=None, help="Timed runs per path (default 50; 30 at full scale)."
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="Rollback repetitions (default 3; 2 at full scale); decay runs at least 7 rounds.",
    )
    parser.add_argument("--page-iterations", type=int, default=None, help="Timed GETs per dashboard page (default 10).")
    parser.add_argument(
        "--no-write", action="store_true", help="Print the table only; leave docs/performance.md alone."
    )
    parser.add_argument("--json", help="Also write the rows to this file.")
    args = parser.parse_args(argv)
    full = args.scale == "full"
    scale = 1.0 if full else float(args.scale)
    iterations = args.iterations or (30 if full else 50)
    rounds = args.rounds or (2 if full else 3)
    page_iterations = args.page_iterations or 10

    configure_environment()
    from graphadmin.runtime.embedded_db import ensure_database

    ensure_database()  # the embedded server, if that is the database, runs before the bench database is dropped
    from bench.generate import _drop_database, generate, generate_history

    started = time.perf_counter()
    print(f"bench: scale {scale:g}; dropping and rebuilding the bench database...", flush=True)
    _drop_database()
    setup_django()
    t = time.perf_counter()
    print("generating the graph (nodes, edges, HNSW index)...", flush=True)
    info = generate(scale, progress=lambda m: print(m, flush=True))
    print(
        f"  {info['nodes']:,} nodes, {info['edges']:,} edges (max out-degree {info['max_out_degree']:,}) in "
        f"{time.perf_counter() - t:.1f} s",
        flush=True,
    )
    t = time.perf_counter()
    print("generating months of history...", flush=True)
    hist = generate_history(info["graph"], scale, progress=lambda m: print(m, flush=True))
    print(
        f"  {hist['weight_changes']:,} weight changes, {hist['batches']:,} batches, {hist['sessions']:,} sessions in "
        f"{time.perf_counter() - t:.1f} s",
        flush=True,
    )
    t = time.perf_counter()
    print("vacuuming the bench database (so autovacuum does not start during the measurements)...", flush=True)
    vacuum_database()
    print(f"  done in {time.perf_counter() - t:.1f} s", flush=True)
    gen_s = time.perf_counter() - started

    bench = Bench(info["graph"], iterations, log=lambda m: print(m, flush=True))
    print(f"measuring ({iterations} runs per path after warm-up)...", flush=True)
    bench.rank("rank 1 hop, 1 start (50 candidates)", lambda: [bench.rnd.choice(bench.hubs)], 1)
    bench.rank(
        "rank 1 hop, 10 starts (500 candidates)", lambda: bench.rnd.sample(bench.hubs, min(10, len(bench.hubs))), 1
    )
    bench.rank("rank 2 hops", lambda: [bench.rnd.choice(bench.mids)], 2)
    bench.search()
    bench.context()
    bench.lexical()
    bench.context_question()
    bench.embeddings()
    bench.uses()
    bench.outcome()
    bench.pages(
        page_iterations
    )  # before decay/rollback: pages see the generated history, not the bench's own bulk batches
    bench.decay_and_rollback(rounds)
    total_s = time.perf_counter() - started

    m = machine()
    table = render_table(bench.rows)
    header = (
        f"Scale {'full' if full else f'{scale:g}'}: {info['nodes']:,} nodes, {info['edges']:,} edges, "
        f"{hist['weight_changes']:,} weight changes, {hist['batches']:,} batches, {hist['sessions']:,} sessions. "
        f"{iterations} timed runs per path ({max(rounds, 7)} for decay, {rounds} for rollback, "
        f"{page_iterations} per page); "
        f"generation {gen_s:.0f} s, whole run {total_s / 60:.1f} min."
    )
    mline = (
        f"Machine: {m['cores']} cores, {m['memory']}, {m['cpu']}; PostgreSQL {m['postgresql']}, pgvector "
        f"{m['pgvector']}; "
        f"Python {m['python']}; commit {m['commit']}; {datetime.now(UTC):%Y-%m-%d %H:%M} UTC."
    )
    print("\n" + header + "\n" + mline + "\n\n" + table, flush=True)
    command = "make bench" + ("" if scale == 0.05 else (" SCALE=full" if full else f" SCALE={scale:g}"))
    section = (
        f"## Benchmark table (generated by `{command}`; the source of truth)\n\n{header}\n\n{mline}\n\n{table}\n\n"
        "p50 and p95 are over the timed runs of that path; *floor* is the median of the raw-SQL floor measured "
        "in the same run "
        "(see `bench/run.py` for each floor); *ratio* = p50 / floor. The sections below explain the figures; "
        "where they "
        "disagree with this table, the table (the latest run) wins."
    )
    if not args.no_write:
        write_docs(section, "full" if full else ("default" if scale == 0.05 else f"scale-{scale:g}"))
        print("\nwrote the table to docs/performance.md", flush=True)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"info": info, "history": hist, "machine": m, "rows": [r.__dict__ for r in bench.rows]},
                fh,
                indent=2,
                default=str,
            )
    return bench.rows


if __name__ == "__main__":
    main()
