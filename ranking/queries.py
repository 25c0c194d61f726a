"""The ranking app's SQL: named statements, each written whole, values bound, tables from ``_meta``.

Why raw SQL: the pipeline's reads order by pgvector distance through HNSW indexes, expand a graph
level by level with a per-node LATERAL cap, and join the candidate log to its use events in one
round trip; the ORM can express none of these in one statement. Each statement is one
triple-quoted text whose only placeholders are ``{table}`` identifiers (filled once, at import,
with ``psycopg.sql.Identifier(Model._meta.db_table)``) and ``%(name)s`` bound parameters. No
value is ever pasted into SQL text (tests/ranking/test_sql_binds_values.py checks it).

Every function taking a query vector takes a list of floats or its ``vector_literal`` text.

* ``retrieval_entry``: every entry point of a retrieval in one statement (ENTRY_SQL): node, triplet
  and lexical top k, the similar questions' evidence, the facts and BM25 of the nodes they name.
* ``expand``: the expansion, the facts of extra nodes and the BM25 of all of them (EXPAND_SQL).
* ``edge_candidates``: the edges within ``hops`` (1..3) of the start nodes (EXPANSION_SQL).
* ``evidence_sessions``: the sessions behind question-conditional evidence (explain).
* ``anchor_distances``: the shortest undirected distance from a set of anchors (ANCHOR_DISTANCES_SQL).
* ``unknown_nodes``: which ids are not active nodes of the graph.
* ``agent_session``, ``copy_candidates`` and ``bump_counters``: a context call's session (made or
  found in one statement), its candidate log and the surfaced/traversed counters of what it gave.
* ``prepared_cursor`` (the SQL toolkit's, graphadmin.models.sql): the cursor EXPAND_SQL is prepared on,
  once per connection.

The per-side statements ENTRY_SQL and EXPAND_SQL replaced (vector, triplet and lexical top k, node
rows, question evidence) live in bench/reference_sql.py, for the tests and the bench's floors.

``graph_id`` is in every table's filter. Archived nodes and edges never appear: every edge is
filtered on ``NOT archived`` and every node it reaches is joined on ``NOT archived``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

import msgspec
from django.conf import settings
from django.db import connection
from psycopg import sql

from feedback.models import AgentSession, ContextInjection, InjectionCandidate, UseEvent, WeightChange
from feedback.rules import ANSWERED, LEARNED_LINK_TYPES, QUESTION_KIND
from graphadmin import clock
from graphadmin.models import Edge, EdgeStats, EdgeType, Node, NodeLexeme, NodeLexicon, NodeStats
from graphadmin.models import sql as sql_toolkit
from graphadmin.models.sql import prepared_cursor

from .scoring import POSITIVE_SIMILARITY, EdgeCandidate, Evidence

# A safety valve on top of the per-node fan-out cap: no request considers more edges than this.
MAX_EDGE_CANDIDATES = 5000
# The deepest expansion EXPANSION_SQL is written for (ranking.retrieval.MAX_HOPS).
EXPANSION_MAX_HOPS = 3
# How many of the graph's question nodes nearest a query are read for evidence (memory and exploration).
SIMILAR_QUESTIONS = 20
# Lower bound of hnsw.ef_search, well above max(2k, 100): on a large graph of tight clusters a smaller
# search can enter the wrong cluster and never leave it, so some queries find none of their true
# neighbours. Every connection carries it (graphadmin.settings HNSW_EF_SEARCH): set too high, pgvector's
# cost estimate for a small graph exceeds the exact sort's and the planner sorts every vector instead of
# using the index. The measurements behind the default are in docs/performance.md and docs/ranking.md
# ("Vector search").
EF_SEARCH_MIN = settings.HNSW_EF_SEARCH

_TABLES = {
    "node": sql.Identifier(Node._meta.db_table),
    "edge": sql.Identifier(Edge._meta.db_table),
    "edgetype": sql.Identifier(EdgeType._meta.db_table),
    "nodestats": sql.Identifier(NodeStats._meta.db_table),
    "edgestats": sql.Identifier(EdgeStats._meta.db_table),
    "session": sql.Identifier(AgentSession._meta.db_table),
    "injection": sql.Identifier(ContextInjection._meta.db_table),
    "candidate": sql.Identifier(InjectionCandidate._meta.db_table),
    "useevent": sql.Identifier(UseEvent._meta.db_table),
    "nodelexeme": sql.Identifier(NodeLexeme._meta.db_table),
    "nodelexicon": sql.Identifier(NodeLexicon._meta.db_table),
}


def statement(text: str, **fragments: str) -> str:
    """A whole statement's text, composed once at import by the SQL toolkit (``graphadmin.models.sql.statement``)
    with ranking's table names: each ``{table}`` a quoted identifier from ``_meta``, each ``{fragment}`` the named
    SQL text shared by several statements (its tables filled in too)."""
    return sql_toolkit.statement(text, tables=_TABLES, **fragments)


def vector_literal(vector) -> str | None:
    """pgvector's text form of a vector ('[x,y,...]'): a parameter value, cast with ``%(query)s::vector``.

    A text already in that form is returned as is, so a request that runs several statements with
    one query vector renders it once (``ranking.retrieval.retrieve``): 384 reprs each time add up.
    """
    if vector is None or isinstance(vector, str):
        return vector
    return "[" + ",".join(map(repr, map(float, vector))) + "]"


# Prepared for EXPAND_SQL, never for ENTRY_SQL (a generic plan of it skips the HNSW indexes):
# docs/decisions/0003-prepared-statements.md. The cursor is the SQL toolkit's (graphadmin.models.sql).


def ef_search_for(k: int) -> int:
    """The HNSW candidate-list size for a top-k query: max(2k, EF_SEARCH_MIN), at most pgvector's 1000."""
    return min(1000, max(2 * k, EF_SEARCH_MIN))


def _finite(value) -> float | None:
    """A similarity as a float, or None when absent or not a number (a zero vector gives NaN)."""
    if value is None:
        return None
    value = float(value)
    return value if value == value and abs(value) != float("inf") else None


_decode_json = msgspec.json.Decoder().decode  # the same values as json.loads, in about a tenth of the time


def _json(value):
    # Django's psycopg 3 backend hands jsonb over as text (JSONField parses it); raw cursors get that text.
    if isinstance(value, str):
        value = _decode_json(value)
    return value or []


# ---------------------------------------------------------------------------------------------
# Rows


@dataclass(frozen=True)
class NodeRow:
    """One vector-search hit, with what the hybrid factors need."""

    node_id: int
    key: str
    title: str
    kind: str
    tags: list
    vector: float | None
    touched_at: datetime | None
    tokens: int
    feedback_weight: float = 0.5


def _node_row(r) -> NodeRow:
    return NodeRow(
        node_id=r[0],
        key=r[1],
        title=r[2],
        kind=r[3],
        tags=_json(r[4]),
        vector=_finite(r[5]),
        touched_at=r[6],
        tokens=r[7],
        feedback_weight=r[8],
    )


# ---------------------------------------------------------------------------------------------
# HNSW search settings

# The HNSW search settings of a top-k query, for the rest of the transaction (set_config(..., true)
# is SET LOCAL): ef_search_for(k), and iterative scans so a graph filter cannot starve the result.
HNSW_SETTINGS_SQL = statement(
    "SELECT set_config('hnsw.ef_search', %(ef_search)s, true), set_config('hnsw.iterative_scan', 'relaxed_order', true)"
)


def _hnsw_settings(cur, k: int) -> None:
    cur.execute(HNSW_SETTINGS_SQL, {"ef_search": str(ef_search_for(k))})


# ---------------------------------------------------------------------------------------------
# BM25 (the lexical entry points; ENTRY_SQL and EXPAND_SQL compute it)

# Okapi BM25's constants (the usual ones: Robertson and Zaragoza; Lucene's and Elasticsearch's defaults).
# The formula, and the per-side statements the retrieval's two statements replaced (vector, triplet and
# lexical top k, node rows, question evidence), are in bench/reference_sql.py: the tests check ENTRY_SQL
# and EXPAND_SQL against them and the bench times them as floors; the product runs none of them.
BM25_K1 = 1.2
BM25_B = 0.75

# BM25 over the graph's lexicon (graphadmin_nodelexeme: a lexeme's term frequency in a node; graphadmin_nodelexicon:
# a node's length), written once and composed into ENTRY_SQL and EXPAND_SQL. Two fragments:
# * BM25_TERMS, three CTEs: ``q`` the query text's distinct lexemes (none when %(lexical)s is false), ``stats`` the
#   graph's node count and mean length (read only when ``q`` has a lexeme), ``idf`` each query lexeme's Okapi idf
#   (only the lexemes in fewer than half the nodes: a positive idf);
# * BM25_SUM, the body of a ``bm25`` CTE: each node's BM25, the sum over the query's lexemes it holds (%(k1)s,
#   %(b)s: BM25_K1, BM25_B); the statement adds its own filter and ``GROUP BY l.node_id``.
BM25_TERMS = """
q AS (
    SELECT DISTINCT u.lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(text)s)) u WHERE %(lexical)s
), stats AS (
    SELECT count(*)::float8 AS n, coalesce(avg(d.length), 0)::float8 AS avglen
    FROM {nodelexicon} d WHERE d.graph_id = %(graph)s AND EXISTS (SELECT 1 FROM q)
), idf AS (
    SELECT l.lexeme, ln((stats.n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
    FROM {nodelexeme} l JOIN q ON q.lexeme = l.lexeme CROSS JOIN stats
    WHERE l.graph_id = %(graph)s
    GROUP BY l.lexeme, stats.n
    HAVING stats.n - count(*) + 0.5 > count(*) + 0.5
)
""".strip()

BM25_SUM = """
SELECT l.node_id,
           sum(idf.idf * l.tf * (%(k1)s + 1) / (l.tf + %(k1)s * (1 - %(b)s + %(b)s * d.length / stats.avglen))) AS bm25
    FROM idf
    JOIN {nodelexeme} l ON l.graph_id = %(graph)s AND l.lexeme = idf.lexeme
    JOIN {nodelexicon} d ON d.node_id = l.node_id AND d.graph_id = %(graph)s
    CROSS JOIN stats
""".strip()


# ---------------------------------------------------------------------------------------------
# Expansion

# The edges within %(hops)s (1..3) of %(starts)s, level by level (the comment above EXPANSION_SQL says how):
# the CTEs f0..f2, l1..l3 and ``expanded`` that EXPANSION_SQL and EXPAND_SQL both start with.
EXPANSION_LEVELS = """
f0 AS (SELECT DISTINCT unnest(%(starts)s::bigint[]) AS id),
l1 AS MATERIALIZED (
    SELECT x.*, 1 AS hops
    FROM f0 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
          AND NOT (e.target_id = ANY(%(starts)s::bigint[]))
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
),
f1 AS (SELECT DISTINCT target_id AS id FROM l1),
l2 AS MATERIALIZED (
    SELECT x.*, 2 AS hops
    FROM f1 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
          AND NOT (e.target_id = ANY(%(starts)s::bigint[]))
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 2
),
f2 AS (SELECT DISTINCT target_id AS id FROM l2 EXCEPT SELECT id FROM f1),
l3 AS MATERIALIZED (
    SELECT x.*, 3 AS hops
    FROM f2 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
          AND NOT (e.target_id = ANY(%(starts)s::bigint[]))
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 3
),
expanded AS MATERIALIZED (SELECT * FROM l1 UNION ALL SELECT * FROM l2 UNION ALL SELECT * FROM l3)
""".strip()

# The edges within %(hops)s (1..3) of the start nodes, in one statement. Level n (l1..l3) takes the
# top %(cap)s out-edges by stored weight of every node first reached at depth n-1 (f0 the start
# nodes, f1 and f2 the new targets of the level before), to active targets that are not start
# nodes, so a hub cannot blow the query up and each node is expanded once, at its shortest depth.
# A level deeper than %(hops)s has a false one-time filter: the planner skips it without reading a
# row. The levels are MATERIALIZED: inlined, the planner may drive the tiny edge-type table as the
# outer loop and run the whole expansion once per edge type. Joined with the target's cosine
# similarity to the query (NULL without one) and the edge type's priority.
EXPANSION_SQL = statement(
    """
WITH {levels}
SELECT a.id, a.source_id, a.target_id, a.hops, a.weight, a.feedback_weight, et.name, et.priority,
       CASE WHEN %(query)s::vector IS NULL OR t.embedding IS NULL THEN NULL
            ELSE 1 - (t.embedding <=> %(query)s::vector) END AS similarity,
       t.key, t.title, t.kind,
       GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int AS tokens,
       t.feedback_weight, t.tags, GREATEST(t.updated_at, s.last_used_at) AS touched_at
FROM expanded a
JOIN {node} t ON t.id = a.target_id AND t.graph_id = %(graph)s
JOIN {edgetype} et ON et.id = a.edge_type_id AND et.graph_id = %(graph)s
LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
ORDER BY a.hops, a.weight DESC, a.id
LIMIT %(max_edges)s
""",
    levels=EXPANSION_LEVELS,
)


def edge_candidates(graph_id: int, start_nodes, query_vector, hops: int, fanout_cap: int) -> list[EdgeCandidate]:
    """Candidate edges within ``hops`` (1..3) of the start nodes, with the target's cosine similarity to the
    query, each with its target node's facts (``target``, a NodeRow)."""
    if not 1 <= hops <= EXPANSION_MAX_HOPS:
        raise ValueError(f"hops must be 1..{EXPANSION_MAX_HOPS}, not {hops}")
    params = {
        "graph": graph_id,
        "starts": list(start_nodes),
        "cap": fanout_cap,
        "hops": hops,
        "query": vector_literal(query_vector),
        "max_edges": MAX_EDGE_CANDIDATES,
    }
    with connection.cursor() as cur:
        cur.execute(EXPANSION_SQL, params)
        rows = cur.fetchall()
    return [
        EdgeCandidate(
            edge_id=r[0],
            source_id=r[1],
            target_id=r[2],
            hops=r[3],
            weight=r[4],
            feedback_weight=r[5],
            edge_type=r[6],
            priority=r[7],
            similarity=_finite(r[8]),
            target=NodeRow(
                node_id=r[2],
                key=r[9],
                title=r[10],
                kind=r[11],
                tags=list(_json(r[14])),
                vector=_finite(r[8]),
                touched_at=r[15],
                tokens=r[12],
                feedback_weight=r[13],
            ),
        )
        for r in rows
    ]


# ---------------------------------------------------------------------------------------------
# Retrieval in two statements: the entry points, then the expansion

# Every entry point of a retrieval in one statement (one round trip, one plan):
# * ``bm25``/``lex``: the BM25 of the graph's nodes for the query text, as LEXICAL_HITS_SQL computes it,
#   and its top %(k)s (when %(lexical)s; no lexeme, or %(lexical)s false: no row, no index read),
# * ``hits``: the %(k)s nearest active non-question nodes (node_embedding_hnsw),
# * ``tri``: the %(k_triplets)s nearest active edges by triplet embedding with both ends active
#   (edge_triplet_hnsw),
# * ``near``/evidence: the ``answered`` edges of the %(n)s nearest question nodes (node_question_hnsw,
#   embedded by %(model)s, at least %(min_similarity)s alike; when %(evidence)s),
# and the NodeRow facts, with their BM25, of every node these name and of the start nodes
# %(starts)s (an id that is no active node of the graph has no row: the caller's check).
# Each vector side orders by the bare distance with its LIMIT in its own MATERIALIZED CTE, so its
# HNSW index serves it (iterative scan under the graph filter: the connection's hnsw settings,
# graphadmin.settings); the caller sorts (relaxed_order may return a near tie out of order). A side
# whose flag is false has a false one-time filter and reads nothing.
# Rows: part 'n' (node facts + distance of a vector hit + bm25), 'l' (node id, bm25), 't' (a triplet
# hit), 'q' (evidence: question id, similarity, note id, weight, edge id); columns not used are NULL.
ENTRY_SQL = statement(
    """
WITH {bm25_terms}, bm25 AS MATERIALIZED (
    {bm25_sum}
    GROUP BY l.node_id
),
lex AS MATERIALIZED (SELECT node_id, bm25 FROM bm25 ORDER BY bm25 DESC, node_id LIMIT %(k)s),
hits AS MATERIALIZED (
    SELECT n.id, n.embedding <=> %(query)s::vector AS distance
    FROM {node} n
    WHERE %(vector)s AND n.graph_id = %(graph)s AND NOT n.archived AND n.embedding IS NOT NULL
      AND n.kind <> %(question)s
    ORDER BY n.embedding <=> %(query)s::vector
    LIMIT %(k)s
),
trip AS MATERIALIZED (
    SELECT e.id, e.triplet_embedding <=> %(query)s::vector AS distance
    FROM {edge} e
    WHERE %(vector)s AND e.graph_id = %(graph)s AND NOT e.archived AND e.triplet_embedding IS NOT NULL
    ORDER BY e.triplet_embedding <=> %(query)s::vector
    LIMIT %(k_triplets)s
),
tri AS MATERIALIZED (
    SELECT e.id, e.source_id, e.target_id, e.weight, e.feedback_weight, et.name, et.priority,
           1 - top.distance AS similarity, top.distance
    FROM trip top
    JOIN {edge} e ON e.id = top.id AND e.graph_id = %(graph)s
    JOIN {node} s ON s.id = e.source_id AND s.graph_id = %(graph)s AND NOT s.archived
    JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
    JOIN {edgetype} et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s
),
near AS MATERIALIZED (
    SELECT n.id, 1 - (n.embedding <=> %(query)s::vector) AS similarity
    FROM {node} n
    WHERE %(evidence)s AND n.graph_id = %(graph)s AND n.kind = %(question)s AND NOT n.archived
      AND n.embedding IS NOT NULL AND n.embedding_model = %(model)s
    ORDER BY n.embedding <=> %(query)s::vector
    LIMIT %(n)s
),
need AS (
    SELECT id FROM hits UNION SELECT node_id FROM lex UNION SELECT source_id FROM tri
    UNION SELECT target_id FROM tri UNION SELECT unnest(%(starts)s::bigint[])
)
SELECT 'n' AS part, t.id, t.key, t.title, t.kind, t.tags,
       CASE WHEN %(query)s::vector IS NULL OR t.embedding IS NULL THEN NULL
            ELSE 1 - (t.embedding <=> %(query)s::vector) END AS vector,
       GREATEST(t.updated_at, s.last_used_at) AS touched_at,
       GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int AS tokens,
       t.feedback_weight,
       h.distance, b.bm25, NULL::bigint, NULL::bigint, NULL::text, NULL::float8
FROM need
JOIN {node} t ON t.id = need.id AND t.graph_id = %(graph)s AND NOT t.archived
LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
LEFT JOIN hits h ON h.id = t.id
LEFT JOIN bm25 b ON b.node_id = t.id
UNION ALL
SELECT 'l', lex.node_id, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, lex.bm25, NULL, NULL, NULL, NULL
FROM lex
UNION ALL
SELECT 't', tri.id, NULL, NULL, NULL, NULL, tri.similarity, NULL, NULL, tri.weight, tri.distance, tri.feedback_weight,
       tri.source_id, tri.target_id, tri.name, tri.priority
FROM tri
UNION ALL
SELECT 'q', near.id, NULL, NULL, NULL, NULL, near.similarity, NULL, NULL, e.weight, NULL, NULL,
       e.target_id, e.id, NULL, NULL
FROM near
JOIN {edge} e ON e.graph_id = %(graph)s AND e.source_id = near.id AND NOT e.archived AND e.weight <> 0.5
JOIN {edgetype} et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s AND et.name = %(answered)s
JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
WHERE near.similarity >= %(min_similarity)s
""",
    bm25_terms=BM25_TERMS,
    bm25_sum=BM25_SUM,
)

# The retrieval's expansion, level by level: from every node first reached at the level before (f0 the
# start nodes, f1 and f2 the new ends of the level before), its top %(cap)s out-links by stored weight AND its
# top %(cap)s in-links (backlinks), to active nodes (start nodes included: a better seed's link may lift a
# weaker one, ranking.scoring.spread; question nodes, the learning's own, excluded: their ``answered`` links
# are evidence, not context). A link is walked both ways: a note's neighbour is as near whichever of the two
# wrote the link (the turn a question answers links back to the question, an index note links to its
# members). ``reverse``: walked from the stored target to the stored source; ``source_id``/``target_id`` are
# the walk's from and to. A level deeper than %(hops)s has a false one-time filter. ``degree``: every end's
# number of active links (ranking.scoring.link_specificity), the links the learning writes itself left out
# (%(learned)s: ``answered`` evidence and ``co_used`` links, feedback.rules.LEARNED_LINK_TYPES): a note shown to or
# used by many sessions is no hub; counted, they faded every link its author wrote.
# Why both ways, and the carry: docs/decisions/0008-expansion-both-ways-carried-relevance.md
EXPAND_LEVELS = """
f0 AS (SELECT DISTINCT unnest(%(starts)s::bigint[]) AS id),
l1 AS MATERIALIZED (
    SELECT x.*, 1 AS hops, false AS reverse
    FROM f0 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    UNION ALL
    SELECT x.*, 1 AS hops, true AS reverse
    FROM f0 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.target_id AS source_id, e.source_id AS target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.source_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.target_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
),
f1 AS (SELECT DISTINCT target_id AS id FROM l1 EXCEPT SELECT id FROM f0),
l2 AS MATERIALIZED (
    SELECT x.*, 2 AS hops, false AS reverse
    FROM f1 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 2
    UNION ALL
    SELECT x.*, 2 AS hops, true AS reverse
    FROM f1 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.target_id AS source_id, e.source_id AS target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.source_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.target_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 2
),
f2 AS (SELECT DISTINCT target_id AS id FROM l2 EXCEPT SELECT id FROM f1 EXCEPT SELECT id FROM f0),
l3 AS MATERIALIZED (
    SELECT x.*, 3 AS hops, false AS reverse
    FROM f2 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.source_id, e.target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.source_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 3
    UNION ALL
    SELECT x.*, 3 AS hops, true AS reverse
    FROM f2 f
    CROSS JOIN LATERAL (
        SELECT e.id, e.target_id AS source_id, e.source_id AS target_id, e.edge_type_id, e.weight, e.feedback_weight
        FROM {edge} e
        JOIN {node} t ON t.id = e.source_id AND t.graph_id = %(graph)s AND NOT t.archived AND t.kind <> %(question)s
        WHERE e.graph_id = %(graph)s AND e.target_id = f.id AND NOT e.archived
        ORDER BY e.weight DESC, e.id
        LIMIT %(cap)s
    ) x
    WHERE %(hops)s >= 3
),
expanded AS MATERIALIZED (SELECT * FROM l1 UNION ALL SELECT * FROM l2 UNION ALL SELECT * FROM l3),
ends AS (SELECT source_id AS id FROM expanded UNION SELECT target_id FROM expanded),
learned_types AS (SELECT et.id FROM {edgetype} et WHERE et.graph_id = %(graph)s AND et.name = ANY(%(learned)s)),
degree AS MATERIALIZED (
    SELECT n.id,
           (SELECT count(*) FROM {edge} e WHERE e.graph_id = %(graph)s AND e.source_id = n.id AND NOT e.archived
              AND e.edge_type_id NOT IN (SELECT id FROM learned_types))
           + (SELECT count(*) FROM {edge} e WHERE e.graph_id = %(graph)s AND e.target_id = n.id AND NOT e.archived
              AND e.edge_type_id NOT IN (SELECT id FROM learned_types))
           AS degree
    FROM ends n
)
""".strip()


# The retrieval's expansion (EXPAND_LEVELS: the links within %(hops)s of %(starts)s, both ways, part 'e') and
# the facts of the nodes %(extra)s (part 'x': the notes similar questions' evidence may bring in), each row
# with its node's BM25 for the query (NULL: none, or %(lexical)s false), in one statement. Columns as
# EXPANSION_SQL's, then reverse and the two ends' degrees (NULL in part 'x'), then bm25.
EXPAND_SQL = statement(
    """
WITH {levels},
edges AS MATERIALIZED (
    SELECT a.id, a.source_id, a.target_id, a.hops, a.weight, a.feedback_weight, et.name, et.priority,
           CASE WHEN %(query)s::vector IS NULL OR t.embedding IS NULL THEN NULL
                ELSE 1 - (t.embedding <=> %(query)s::vector) END AS similarity,
           t.key, t.title, t.kind,
           GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int AS tokens,
           t.feedback_weight AS target_feedback_weight, t.tags, GREATEST(t.updated_at, s.last_used_at) AS touched_at,
           a.reverse, df.degree AS source_degree, dt.degree AS target_degree
    FROM expanded a
    JOIN {node} t ON t.id = a.target_id AND t.graph_id = %(graph)s
    JOIN {edgetype} et ON et.id = a.edge_type_id AND et.graph_id = %(graph)s
    JOIN degree df ON df.id = a.source_id
    JOIN degree dt ON dt.id = a.target_id
    LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
    ORDER BY a.hops, a.weight DESC, a.id, a.reverse
    LIMIT %(max_edges)s
),
{bm25_terms}, bm25 AS MATERIALIZED (
    {bm25_sum}
    WHERE (l.node_id IN (SELECT target_id FROM edges) OR l.node_id = ANY(%(extra)s::bigint[]))
    GROUP BY l.node_id
)
SELECT 'e' AS part, a.*, b.bm25
FROM edges a
LEFT JOIN bm25 b ON b.node_id = a.target_id
UNION ALL
SELECT 'x', NULL, NULL, t.id, NULL, NULL, NULL, NULL, NULL,
       CASE WHEN %(query)s::vector IS NULL OR t.embedding IS NULL THEN NULL
            ELSE 1 - (t.embedding <=> %(query)s::vector) END,
       t.key, t.title, t.kind,
       GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int,
       t.feedback_weight, t.tags, GREATEST(t.updated_at, s.last_used_at), NULL, NULL, NULL, b.bm25
FROM {node} t
LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
LEFT JOIN bm25 b ON b.node_id = t.id
WHERE t.graph_id = %(graph)s AND t.id = ANY(%(extra)s::bigint[]) AND NOT t.archived
ORDER BY 1, 5, 6 DESC, 2, 18, 4
""",
    levels=EXPAND_LEVELS,
    bm25_terms=BM25_TERMS,
    bm25_sum=BM25_SUM,
)


@dataclass
class Entry:
    """What ENTRY_SQL found: ``rows`` the NodeRow of every node it names (the vector hits nearest
    first, then the others by id), ``hits`` the vector hits' ids (nearest first), ``lexical`` the BM25
    top k (best first), ``bm25`` the BM25 of every node in ``rows`` that has one, ``triplets`` the
    triplet hits (nearest first; ``similarity`` the triplet's own) and ``evidence`` the similar
    questions' evidence (most similar first)."""

    rows: dict[int, NodeRow]
    hits: list[int]
    lexical: list[tuple[int, float]]
    bm25: dict[int, float]
    triplets: list[EdgeCandidate]
    evidence: list[Evidence]


def retrieval_entry(
    graph_id: int,
    query_vector,
    *,
    text: str,
    config: str,
    k: int,
    k_triplets: int,
    lexical: bool,
    evidence: bool,
    model: str,
    starts=(),
    n: int = SIMILAR_QUESTIONS,
) -> Entry:
    """Every entry point of a retrieval in one statement (ENTRY_SQL): the vector, triplet and lexical
    top k, the similar questions' evidence (``evidence``; ``model``: the query vector's), and the
    facts of every node they name and of ``starts``. Without a query vector, the vector sides and the
    evidence are empty; without ``lexical`` (or words), the lexical side is."""
    query = vector_literal(query_vector)
    params = {
        "graph": graph_id,
        "query": query,
        "vector": query is not None,
        "k": k,
        "k_triplets": k_triplets,
        "question": QUESTION_KIND,
        "lexical": bool(lexical and text and text.strip()),
        "text": text or "",
        "config": config,
        "k1": BM25_K1,
        "b": BM25_B,
        "evidence": bool(evidence and query is not None),
        "model": model,
        "n": n,
        "answered": ANSWERED,
        "min_similarity": POSITIVE_SIMILARITY,
        "starts": sorted(set(starts)),
    }
    with connection.cursor() as cur:
        if query is not None and ef_search_for(max(k, k_triplets, n)) > EF_SEARCH_MIN:
            _hnsw_settings(cur, max(k, k_triplets, n))  # a k above the connection's setting (at most 1000)
        cur.execute(ENTRY_SQL, params)
        found = cur.fetchall()
    return _entry_from_rows(found)


def _entry_from_rows(found) -> Entry:
    """ENTRY_SQL's rows, tagged by part (n: a node's facts, l: a lexical hit, t: a triplet hit, else
    evidence), sorted and read into an Entry."""
    hits, others, lex, bm25, triplets, ev = [], [], [], {}, [], []
    for r in found:
        part = r[0]
        if part == "n":
            row = _node_row(r[1:10])
            (hits if r[10] is not None else others).append((r[10], row))
            if r[11] is not None:
                bm25[row.node_id] = float(r[11])
        elif part == "l":
            lex.append((r[1], float(r[11])))
        elif part == "t":
            triplets.append((r[10], r[1], r))
        else:
            ev.append(r)
    hits.sort(key=lambda h: (h[0], h[1].node_id))
    others.sort(key=lambda h: h[1].node_id)
    lex.sort(key=lambda x: (-x[1], x[0]))
    triplets.sort(key=lambda t: (t[0], t[1]))
    ev.sort(key=lambda r: (-r[6], r[1], r[12]))
    return Entry(
        rows={row.node_id: row for _, row in [*hits, *others]},
        hits=[row.node_id for _, row in hits],
        lexical=lex,
        bm25=bm25,
        triplets=[
            EdgeCandidate(
                edge_id=r[1],
                source_id=r[12],
                target_id=r[13],
                hops=1,
                weight=r[9],
                feedback_weight=r[11],
                edge_type=r[14],
                priority=r[15],
                similarity=_finite(r[6]) or 0.0,
            )
            for _, _, r in triplets
        ],
        evidence=[
            Evidence(question_id=r[1], similarity=_finite(r[6]) or 0.0, node_id=r[12], weight=r[9], edge_id=r[13])
            for r in ev
        ],
    )


def _expansion_edge(r, reverse: bool = False, degrees: tuple = (None, None)) -> EdgeCandidate:
    return EdgeCandidate(
        reverse=bool(reverse),
        degrees=degrees,
        edge_id=r[0],
        source_id=r[1],
        target_id=r[2],
        hops=r[3],
        weight=r[4],
        feedback_weight=r[5],
        edge_type=r[6],
        priority=r[7],
        similarity=_finite(r[8]),
        target=NodeRow(
            node_id=r[2],
            key=r[9],
            title=r[10],
            kind=r[11],
            tags=list(_json(r[14])),
            vector=_finite(r[8]),
            touched_at=r[15],
            tokens=r[12],
            feedback_weight=r[13],
        ),
    )


def expand(
    graph_id: int,
    start_nodes,
    query_vector,
    hops: int,
    fanout_cap: int,
    *,
    extra=(),
    text: str = "",
    config: str = "simple",
    lexical: bool = False,
) -> tuple[list[EdgeCandidate], dict[int, NodeRow], dict[int, float]]:
    """The expansion (the links within ``hops`` of the start nodes, walked both ways: ``reverse`` and
    ``degrees`` set; by level, then stored weight), the NodeRow of the active nodes among ``extra``, and the
    BM25 for ``text`` of every node these reach (the links' far ends and ``extra``; only those with one), in
    one statement (EXPAND_SQL)."""
    if not 1 <= hops <= EXPANSION_MAX_HOPS:
        raise ValueError(f"hops must be 1..{EXPANSION_MAX_HOPS}, not {hops}")
    lexical = bool(lexical and text and text.strip())
    params = {
        "graph": graph_id,
        "starts": list(start_nodes),
        "cap": fanout_cap,
        "hops": hops,
        "query": vector_literal(query_vector),
        "max_edges": MAX_EDGE_CANDIDATES,
        "extra": sorted(set(extra)),
        "question": QUESTION_KIND,
        "learned": list(LEARNED_LINK_TYPES),
        "lexical": lexical,
        "text": text or "",
        "config": config,
        # numeric, as the literals Django's cursor inlines: BM25 computed with the same operations, bit for bit.
        "k1": Decimal(repr(BM25_K1)),
        "b": Decimal(repr(BM25_B)),
    }
    # Prepared: the statement's plan (its parse and planning cost several times its run on a small graph)
    # is kept on a persistent connection; the results are the same rows (no approximate index in it).
    with prepared_cursor() as cur:
        cur.execute(EXPAND_SQL, params)
        found = cur.fetchall()
    edges, rows, bm25 = [], {}, {}
    for r in found:
        if r[20] is not None:
            bm25[r[3]] = float(r[20])
        if r[0] == "e":
            edges.append(_expansion_edge(r[1:17], reverse=r[17], degrees=(r[18], r[19])))
        else:
            edge = _expansion_edge(r[1:17])
            rows[edge.target_id] = edge.target
    return edges, rows, bm25


# ---------------------------------------------------------------------------------------------
# Question-conditional evidence (its retrieval side is ENTRY_SQL's part 'q')


def evidence_sessions(graph_id: int, edge_ids) -> dict[int, list[dict]]:
    """The applied changes of the given ``answered`` edges, oldest first, with the session that caused each
    and the question text: answered edge id -> [{session, batch, event, before, after, question}]. What
    explain names as the past sessions that lifted or lowered a candidate."""
    if not edge_ids:
        return {}

    found: dict[int, list[dict]] = {}
    rows = (
        WeightChange.objects.filter(
            graph_id=graph_id, edge_id__in=sorted(edge_ids), field="weight", batch__status="applied"
        )
        .exclude(batch__trigger_session=None)
        .order_by("created_at", "id")
        .values(
            "edge_id",
            "batch_id",
            "event",
            "before",
            "after",
            "batch__trigger_session__external_id",
            "edge__source__title",
        )
    )
    for r in rows:
        found.setdefault(r["edge_id"], []).append(
            {
                "session": r["batch__trigger_session__external_id"],
                "batch": r["batch_id"],
                "event": r["event"],
                "before": r["before"],
                "after": r["after"],
                "question": r["edge__source__title"],
            }
        )
    return found


# ---------------------------------------------------------------------------------------------
# Anchor distances

# The shortest undirected hop count from the anchors to each candidate, bounded by max_hops (1..3),
# meeting in the middle: %(forward)s = ceil(max_hops / 2) levels out from the anchors (f1, and f2
# when forward is 2), then %(backward)s = max_hops - forward (0 or 1) level back from each
# candidate, so hubs two hops away are never enumerated. NULL: unreachable within max_hops.
ANCHOR_DISTANCES_SQL = statement(
    """
WITH f0 AS (SELECT DISTINCT unnest(%(anchors)s::bigint[]) AS id),
f1 AS (
    SELECT DISTINCT u.nbr AS id FROM (
        SELECT e.target_id AS nbr FROM {edge} e
        WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.source_id IN (SELECT id FROM f0)
        UNION ALL
        SELECT e.source_id FROM {edge} e
        WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.target_id IN (SELECT id FROM f0)
    ) u
    JOIN {node} n ON n.id = u.nbr AND n.graph_id = %(graph)s AND NOT n.archived
),
f2 AS (
    SELECT DISTINCT u.nbr AS id FROM (
        SELECT e.target_id AS nbr FROM {edge} e
        WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.source_id IN (SELECT id FROM f1)
        UNION ALL
        SELECT e.source_id FROM {edge} e
        WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.target_id IN (SELECT id FROM f1)
    ) u
    JOIN {node} n ON n.id = u.nbr AND n.graph_id = %(graph)s AND NOT n.archived
    WHERE %(forward)s >= 2
),
fwd AS (
    SELECT id, min(d) AS d FROM (
        SELECT id, 0 AS d FROM f0 UNION ALL SELECT id, 1 FROM f1 UNION ALL SELECT id, 2 FROM f2
    ) x GROUP BY id
),
cand AS (SELECT DISTINCT unnest(%(candidates)s::bigint[]) AS id)
SELECT c.id,
       LEAST(
           (SELECT d FROM fwd WHERE fwd.id = c.id),
           CASE WHEN %(backward)s >= 1 THEN (
               SELECT min(f.d) + 1 FROM (
                   SELECT e.target_id AS nbr FROM {edge} e
                   WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.source_id = c.id
                   UNION ALL
                   SELECT e.source_id FROM {edge} e
                   WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.target_id = c.id
               ) b JOIN fwd f ON f.id = b.nbr
           ) END
       ) AS hops
FROM cand c
"""
)


def anchor_distances(graph_id: int, anchors, candidates, max_hops: int) -> dict[int, int | None]:
    """Shortest undirected hop count (<= max_hops, 1..3) from any anchor to each candidate; None: unreachable."""
    if not anchors or not candidates:
        return {c: None for c in candidates}
    if not 1 <= max_hops <= EXPANSION_MAX_HOPS:
        raise ValueError(f"max_hops must be 1..{EXPANSION_MAX_HOPS}, not {max_hops}")
    forward = (max_hops + 1) // 2
    params = {
        "graph": graph_id,
        "anchors": list(anchors),
        "candidates": list(candidates),
        "forward": forward,
        "backward": max_hops - forward,
    }
    with connection.cursor() as cur:
        cur.execute(ANCHOR_DISTANCES_SQL, params)
        return {row[0]: row[1] for row in cur.fetchall()}


# ---------------------------------------------------------------------------------------------
# The selected notes' text (a context call's answer)

# id, key, title, kind and text of the graph's nodes among %(ids)s.
NODE_TEXTS_SQL = statement(
    "SELECT id, key, title, kind, text FROM {node} WHERE graph_id = %(graph)s AND id = ANY(%(ids)s::bigint[])"
)


def node_texts(graph_id: int, node_ids) -> dict[int, dict]:
    """{id: {id, key, title, kind, text}} of the graph's nodes among ``node_ids`` (archived ones too, as the
    candidates read them a moment ago): what the context answer shows of each selected note."""
    ids = sorted(set(node_ids))
    if not ids:
        return {}
    with connection.cursor() as cur:
        cur.execute(NODE_TEXTS_SQL, {"graph": graph_id, "ids": ids})
        return {r[0]: {"id": r[0], "key": r[1], "title": r[2], "kind": r[3], "text": r[4]} for r in cur.fetchall()}


# ---------------------------------------------------------------------------------------------
# Input checks

# The ids among %(ids)s that are active nodes of the graph.
ACTIVE_NODE_IDS_SQL = statement(
    "SELECT id FROM {node} WHERE graph_id = %(graph)s AND id = ANY(%(ids)s::bigint[]) AND NOT archived"
)


def unknown_nodes(graph_id: int, node_ids) -> list[int]:
    """The ids among ``node_ids`` that are not active nodes of the graph (sorted)."""
    ids = sorted(set(node_ids))
    if not ids:
        return []
    with connection.cursor() as cur:
        cur.execute(ACTIVE_NODE_IDS_SQL, {"graph": graph_id, "ids": ids})
        found = {r[0] for r in cur.fetchall()}
    return [i for i in ids if i not in found]


# ---------------------------------------------------------------------------------------------
# The candidate log and the counters of a context call

CANDIDATE_COLUMNS = (
    "injection_id",
    "graph_id",
    "rank",
    "selected",
    "node_id",
    "edge_id",
    "hops",
    "tokens",
    "total",
    "features",
    "components",
    "created_at",
)

# Every candidate of an injection, one COPY (far cheaper than a bulk INSERT of JSON rows:
# docs/decisions/0004-candidate-log-copy-msgspec.md).
COPY_CANDIDATES_SQL = (
    sql.SQL("COPY {candidate} ({columns}) FROM STDIN")
    .format(candidate=_TABLES["candidate"], columns=sql.SQL(", ").join(map(sql.Identifier, CANDIDATE_COLUMNS)))
    .as_string()
)


# The candidate log's JSON encoder (msgspec: a tenth of json.dumps' time on these dicts; the same JSON values;
# docs/decisions/0004-candidate-log-copy-msgspec.md).
_encode_json = msgspec.json.Encoder().encode


def copy_candidates(injection_id: int, graph_id: int, rows, created_at) -> None:
    """Write an injection's candidates: ``rows`` of (rank, selected, node id, edge id, hops, tokens,
    total, features dict, components dict), stamped with the injection's ``created_at`` (the log's
    monthly partition, feedback.retention)."""
    encode = _encode_json
    with connection.cursor() as cur:
        with cur.cursor.copy(COPY_CANDIDATES_SQL) as copy:
            for rank, selected, node_id, edge_id, hops, tokens, total, features, components in rows:
                copy.write_row(
                    (
                        injection_id,
                        graph_id,
                        rank,
                        selected,
                        node_id,
                        edge_id,
                        hops,
                        tokens,
                        total,
                        encode(features).decode(),
                        encode(components).decode(),
                        created_at,
                    )
                )


# ---------------------------------------------------------------------------------------------
# The session of a context call

# The session %(session)s of the graph, made (owned by %(owner)s, started %(at)s) when it is new: one
# statement instead of get_or_create's SELECT, savepoint, INSERT and release. Rows: (id, owner id,
# created). No row when another transaction made the session after this statement's snapshot was taken
# (the INSERT waited for it and found the conflict): ``agent_session`` then reads it again.
SESSION_SQL = statement(
    """
WITH made AS (
    INSERT INTO {session} (graph_id, external_id, owner_id, started_at)
    VALUES (%(graph)s, %(session)s, %(owner)s, %(at)s)
    ON CONFLICT (graph_id, external_id) DO NOTHING
    RETURNING id, owner_id
)
SELECT id, owner_id, true FROM made
UNION ALL
SELECT id, owner_id, false FROM {session}
WHERE graph_id = %(graph)s AND external_id = %(session)s AND NOT EXISTS (SELECT 1 FROM made)
"""
)

SESSION_AGAIN_SQL = statement(
    "SELECT id, owner_id, false FROM {session} WHERE graph_id = %(graph)s AND external_id = %(session)s"
)


def agent_session(graph_id: int, external_id: str, owner_id: int | None) -> tuple[int, int | None, bool]:
    """The graph's session ``external_id``: (id, owner id, whether this call made it, owned by ``owner_id``).
    Started on ``graphadmin.clock``'s time, as AgentSession's default. In the caller's transaction."""
    params = {"graph": graph_id, "session": external_id, "owner": owner_id, "at": clock.now()}
    with connection.cursor() as cur:
        cur.execute(SESSION_SQL, params)
        row = cur.fetchone()
        if row is None:  # made by a concurrent call since this statement began: visible to a new statement
            cur.execute(SESSION_AGAIN_SQL, params)
            row = cur.fetchone()
    return row[0], row[1], row[2]


# The session answered a question while the graph still had %(pending)s vectors to write (graphadmin.readiness):
# its reports teach nothing (feedback.reports.check_ready). Only run then, so a ready graph's answers skip it.
SESSION_UNREADY_SQL = statement(
    """
UPDATE {session} SET vectors_pending = GREATEST(vectors_pending, %(pending)s)
WHERE graph_id = %(graph)s AND id = %(session)s
"""
)


def mark_session_unready(graph_id: int, session_id: int, pending: int) -> None:
    """Remember on the session that a question of it was answered with ``pending`` vectors still to write."""
    with connection.cursor() as cur:
        cur.execute(SESSION_UNREADY_SQL, {"graph": graph_id, "session": session_id, "pending": pending})


# Each node in %(ids)s surfaced once more (and traversed when it is in %(through)s: it came along a path),
# each edge in %(edges)s surfaced and traversed once more (decay spares a traversed edge): one statement (the
# nodes' INSERT, a data-modifying WITH, runs to completion though nothing reads it).
COUNTERS_SQL = statement(
    """
WITH nodes AS (
INSERT INTO {nodestats} (node_id, graph_id, surfaced_count, traversed_count, used_count, last_surfaced_at)
SELECT n, %(graph)s, 1, (n = ANY(%(through)s::bigint[]))::int, 0, %(at)s FROM unnest(%(ids)s::bigint[]) AS n
ON CONFLICT (node_id) DO UPDATE SET
    surfaced_count = {nodestats}.surfaced_count + 1,
    traversed_count = {nodestats}.traversed_count + EXCLUDED.traversed_count,
    last_surfaced_at = EXCLUDED.last_surfaced_at
)
INSERT INTO {edgestats} (edge_id, graph_id, surfaced_count, traversed_count, used_count, last_traversed_at)
SELECT e, %(graph)s, 1, 1, 0, %(at)s FROM unnest(%(edges)s::bigint[]) AS e
ON CONFLICT (edge_id) DO UPDATE SET
    surfaced_count = {edgestats}.surfaced_count + 1,
    traversed_count = {edgestats}.traversed_count + 1,
    last_traversed_at = EXCLUDED.last_traversed_at
"""
)


def bump_counters(graph_id: int, node_ids, through, edge_ids) -> None:
    """Count what a context call gave: ``node_ids`` surfaced (``through``: those that came along a
    path, also traversed), ``edge_ids`` surfaced and traversed. Set-based, in one statement. The
    stamps take ``graphadmin.clock``'s time, as every other row of the call does, so a decay run on a
    simulated clock sees when an edge was traversed on that clock."""
    at = clock.now()
    if not node_ids and not edge_ids:
        return
    params = {"graph": graph_id, "ids": list(node_ids), "through": list(through), "edges": list(edge_ids), "at": at}
    with connection.cursor() as cur:
        cur.execute(COUNTERS_SQL, params)


# ---------------------------------------------------------------------------------------------
# What-if: the frozen score inputs of many injections' candidates

# Each logged candidate's score inputs (ranking.retrieval.Candidate.features), as columns: a what-if over 200
# sessions reads about 10,000 of them, and decoding every features document in Python (its paths and evidence
# included) was most of its time. Candidates by injection, in rank order; the partitions pruned by time.
WHATIF_CANDIDATES_SQL = statement(
    """
    SELECT c.injection_id, c.node_id, c.edge_id,
           (c.features ->> 'vector')::float8, (c.features ->> 'hops')::int, (c.features ->> 'age_days')::float8,
           (c.features ->> 'persona')::float8, (c.features ->> 'feedback_weight')::float8,
           (c.features ->> 'path_weight')::float8, (c.features ->> 'priority')::float8, c.features ->> 'edge_type',
           (c.features ->> 'novelty')::float8, (c.features ->> 'memory')::float8, (c.features ->> 'lexical')::float8,
           (c.features ->> 'inherited')::float8
    FROM {candidate} c
    WHERE c.graph_id = %(graph)s AND c.injection_id = ANY(%(ids)s::bigint[]) AND c.created_at >= %(since)s
    ORDER BY c.injection_id, c.rank
    """
)


def whatif_candidates(graph_id: int, injection_ids, since: datetime) -> list[tuple]:
    """(injection, node, edge, vector, hops, age_days, persona, feedback_weight, path_weight, priority, edge_type,
    novelty, memory, lexical, inherited) of the logged candidates of ``injection_ids`` (logged since ``since``)."""
    if not injection_ids:
        return []
    with connection.cursor() as cur:
        cur.execute(WHATIF_CANDIDATES_SQL, {"graph": graph_id, "ids": list(injection_ids), "since": since})
        return cur.fetchall()
