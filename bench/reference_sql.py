"""The retrieval's per-side statements, one SQL statement per side: the reference the product's two
retrieval statements (ranking.queries ENTRY_SQL and EXPAND_SQL) are tested against, and the bench's floors.

The product ran these, one round trip each, until ENTRY_SQL and EXPAND_SQL did all of it in two
(docs/history/performance-agent-session.md, "Issue 27: retrieval round trips and the candidate log"). They
stay written whole here, outside the product module, because they are the readable specification of each side:
tests/ranking/test_retrieval_statements.py checks that the two statements give what these give,
tests/ranking/test_lexical.py checks ``lexical_hits`` against rank_bm25 (a reference BM25), and
bench/run.py and bench/lexical_quality.py time them as floors (the bare HNSW query, BM25 alone).

* ``entry_points``: the HNSW top-k nodes for a query vector (NODE_HITS_SQL) and the HNSW top-k
  edges by triplet embedding, "source -> type -> target" (TRIPLET_HITS_SQL), in one transaction.
* ``vector_candidates``: the node hits alone (the bench's vector step).
* ``lexical_hits``: the top-k nodes by BM25 for a query text (LEXICAL_HITS_SQL), or the BM25 of given
  nodes; over the lexical index the node table's triggers keep (graphadmin.models.NodeLexeme).
* ``node_rows``: the same facts as a vector hit, for nodes given by id (start nodes, triplet ends).
* ``question_evidence``: the ``answered`` edges of the question nodes nearest the query.
* ``expansion``: the links expansion walks, both ways, level by level (OUT_LINKS_SQL and BACKLINKS_SQL for
  each level, LINK_DEGREES_SQL for their ends, NODE_ROWS_SQL for the nodes they reach): what EXPAND_SQL's
  part 'e' gives in one statement.

Same conventions as ranking.queries: tables from ``_meta`` through ``statement``, values bound.
"""

from __future__ import annotations

from django.db import connection, transaction

from feedback.rules import ANSWERED, LEARNED_LINK_TYPES, QUESTION_KIND
from ranking.queries import (
    BM25_B,
    BM25_K1,
    MAX_EDGE_CANDIDATES,
    SIMILAR_QUESTIONS,
    EdgeCandidate,
    NodeRow,
    _finite,
    _hnsw_settings,
    _node_row,
    statement,
    vector_literal,
)
from ranking.scoring import POSITIVE_SIMILARITY, Evidence

# The k nearest active nodes of the graph by cosine distance (through the HNSW index: the inner
# query orders by the bare distance so the index serves it), with their score inputs. Tokens: the
# estimate ceil(characters / 4) of title + "\n" + text, at least 1 (as ranking.queries computes it).
NODE_HITS_SQL = statement(
    """
SELECT t.id, t.key, t.title, t.kind, t.tags, 1 - top.distance AS vector,
       GREATEST(t.updated_at, s.last_used_at) AS touched_at,
       GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int AS tokens,
       t.feedback_weight
FROM (
    SELECT n.id, n.embedding <=> %(query)s::vector AS distance
    FROM {node} n
    WHERE n.graph_id = %(graph)s AND NOT n.archived AND n.embedding IS NOT NULL AND n.kind <> %(question)s
    ORDER BY n.embedding <=> %(query)s::vector
    LIMIT %(k)s
) top
JOIN {node} t ON t.id = top.id AND t.graph_id = %(graph)s
LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
ORDER BY top.distance, t.id
"""
)

# The k nearest active edges of the graph by triplet embedding ("source -> type -> target"), both
# ends active, with their traversal inputs.
TRIPLET_HITS_SQL = statement(
    """
SELECT e.id, e.source_id, e.target_id, e.weight, e.feedback_weight, et.name, et.priority,
       1 - top.distance AS similarity
FROM (
    SELECT e.id, e.triplet_embedding <=> %(query)s::vector AS distance
    FROM {edge} e
    WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.triplet_embedding IS NOT NULL
    ORDER BY e.triplet_embedding <=> %(query)s::vector
    LIMIT %(k)s
) top
JOIN {edge} e ON e.id = top.id AND e.graph_id = %(graph)s
JOIN {node} s ON s.id = e.source_id AND s.graph_id = %(graph)s AND NOT s.archived
JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
JOIN {edgetype} et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s
ORDER BY top.distance, e.id
"""
)


def vector_candidates(graph_id: int, query_vector, k: int) -> list[NodeRow]:
    """The k nearest active nodes by cosine distance, through the HNSW index (approximate)."""
    with transaction.atomic(), connection.cursor() as cur:
        _hnsw_settings(cur, k)
        cur.execute(
            NODE_HITS_SQL, {"graph": graph_id, "query": vector_literal(query_vector), "k": k, "question": QUESTION_KIND}
        )
        rows = cur.fetchall()
    return [_node_row(r) for r in rows]


def entry_points(
    graph_id: int, query_vector, k_nodes: int, k_triplets: int
) -> tuple[list[NodeRow], list[EdgeCandidate]]:
    """The retrieval's vector entry points: the top ``k_nodes`` nodes and top ``k_triplets`` triplets.

    Both through their HNSW index (approximate), in one transaction so the search settings are set
    once (see ``vector_candidates``). Triplets whose ends are archived are left out; a triplet's
    ``similarity`` is its own (the triplet embedding's) and its ``target`` is not read (None). No savepoint:
    inside a caller's transaction the settings simply last until it ends (they only widen the search).
    """
    with transaction.atomic(savepoint=False), connection.cursor() as cur:
        _hnsw_settings(cur, max(k_nodes, k_triplets))
        query = vector_literal(query_vector)
        cur.execute(NODE_HITS_SQL, {"graph": graph_id, "query": query, "k": k_nodes, "question": QUESTION_KIND})
        nodes = [_node_row(r) for r in cur.fetchall()]
        triplets = []
        if k_triplets:
            cur.execute(TRIPLET_HITS_SQL, {"graph": graph_id, "query": query, "k": k_triplets})
            triplets = [
                EdgeCandidate(
                    edge_id=r[0],
                    source_id=r[1],
                    target_id=r[2],
                    hops=1,
                    weight=r[3],
                    feedback_weight=r[4],
                    edge_type=r[5],
                    priority=r[6],
                    similarity=_finite(r[7]) or 0.0,
                )
                for r in cur.fetchall()
            ]
    return nodes, triplets


# BM25 of the graph's active nodes for a query text, best first. The query's lexemes come from
# to_tsvector with the graph's text-search configuration (stop words and punctuation give none);
# N and the mean document length from NodeLexicon, each lexeme's document frequency from NodeLexeme.
# idf = ln((N - df + 0.5) / (df + 0.5)), and a lexeme whose idf is not positive (in half the nodes or
# more) is left out: it scores nothing (a term in every note says nothing about any of them).
# score = sum over the query's distinct lexemes of idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len / avglen)).
# %(ids)s NULL: the top %(k)s; else the scores of those nodes (the candidates the entry points missed).
LEXICAL_HITS_SQL = statement(
    """
WITH q AS (
    SELECT DISTINCT u.lexeme FROM unnest(to_tsvector(%(config)s::regconfig, %(text)s)) u
), stats AS (
    SELECT count(*)::float8 AS n, coalesce(avg(d.length), 0)::float8 AS avglen
    FROM {nodelexicon} d WHERE d.graph_id = %(graph)s
), idf AS (
    SELECT l.lexeme, ln((stats.n - count(*) + 0.5) / (count(*) + 0.5)) AS idf
    FROM {nodelexeme} l JOIN q ON q.lexeme = l.lexeme CROSS JOIN stats
    WHERE l.graph_id = %(graph)s
    GROUP BY l.lexeme, stats.n
    HAVING stats.n - count(*) + 0.5 > count(*) + 0.5
)
SELECT l.node_id,
       sum(idf.idf * l.tf * (%(k1)s + 1) / (l.tf + %(k1)s * (1 - %(b)s + %(b)s * d.length / stats.avglen))) AS bm25
FROM idf
JOIN {nodelexeme} l ON l.graph_id = %(graph)s AND l.lexeme = idf.lexeme
JOIN {nodelexicon} d ON d.node_id = l.node_id AND d.graph_id = %(graph)s
CROSS JOIN stats
WHERE %(ids)s::bigint[] IS NULL OR l.node_id = ANY(%(ids)s::bigint[])
GROUP BY l.node_id
ORDER BY bm25 DESC, l.node_id
LIMIT %(k)s
"""
)


def lexical_hits(graph_id: int, text: str, config: str, k: int, node_ids=None) -> list[tuple[int, float]]:
    """(node id, BM25) of the graph's best ``k`` active nodes for ``text``, best first; with ``node_ids``,
    of those nodes only (the ones with a positive score). A text of only stop words or punctuation has
    no lexeme and finds nothing (never an error)."""
    if not text or not text.strip() or (node_ids is not None and not node_ids):
        return []
    params = {
        "graph": graph_id,
        "text": text,
        "config": config,
        "k": k if node_ids is None else len(node_ids),
        "ids": None if node_ids is None else sorted(set(node_ids)),
        "k1": BM25_K1,
        "b": BM25_B,
    }
    with connection.cursor() as cur:
        cur.execute(LEXICAL_HITS_SQL, params)
        return [(r[0], float(r[1])) for r in cur.fetchall()]


# Active nodes of the graph given by id, with the facts of a vector hit (similarity to the query,
# or NULL without one).
NODE_ROWS_SQL = statement(
    """
SELECT t.id, t.key, t.title, t.kind, t.tags,
       CASE WHEN %(query)s::vector IS NULL OR t.embedding IS NULL THEN NULL
            ELSE 1 - (t.embedding <=> %(query)s::vector) END AS vector,
       GREATEST(t.updated_at, s.last_used_at) AS touched_at,
       GREATEST(1, CEIL((char_length(t.title) + 1 + char_length(t.text)) / 4.0))::int AS tokens,
       t.feedback_weight
FROM {node} t
LEFT JOIN {nodestats} s ON s.node_id = t.id AND s.graph_id = %(graph)s
WHERE t.graph_id = %(graph)s AND t.id = ANY(%(ids)s::bigint[]) AND NOT t.archived
ORDER BY t.id
"""
)


def node_rows(graph_id: int, node_ids, query_vector) -> list[NodeRow]:
    """The facts a node score needs, for active nodes given by id, with their similarity to the query."""
    ids = sorted(set(node_ids))
    if not ids:
        return []
    with connection.cursor() as cur:
        cur.execute(NODE_ROWS_SQL, {"graph": graph_id, "ids": ids, "query": vector_literal(query_vector)})
        return [_node_row(r) for r in cur.fetchall()]


# The %(n)s question nodes of the graph (kind %(kind)s, embedded by %(model)s) nearest this query,
# through their partial HNSW index (node_question_hnsw), at least %(min_similarity)s alike, and the
# ``answered`` edges (type name %(answered)s) from them to active notes that hold evidence (weight not
# neutral): question id, similarity, note id, weight, edge id. Ledger state only (no use event or
# candidate log is read), so what a rollback restores is what retrieval reads.
QUESTION_EVIDENCE_SQL = statement(
    """
WITH near AS MATERIALIZED (
    SELECT n.id, 1 - (n.embedding <=> %(query)s::vector) AS similarity
    FROM {node} n
    WHERE n.graph_id = %(graph)s AND n.kind = %(kind)s AND NOT n.archived AND n.embedding IS NOT NULL
      AND n.embedding_model = %(model)s
    ORDER BY n.embedding <=> %(query)s::vector
    LIMIT %(n)s
)
SELECT near.id, near.similarity, e.target_id, e.weight, e.id
FROM near
JOIN {edge} e ON e.graph_id = %(graph)s AND e.source_id = near.id AND NOT e.archived AND e.weight <> 0.5
JOIN {edgetype} et ON et.id = e.edge_type_id AND et.graph_id = %(graph)s AND et.name = %(answered)s
JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s AND NOT t.archived
WHERE near.similarity >= %(min_similarity)s
ORDER BY near.similarity DESC, near.id, e.target_id
"""
)


def question_evidence(graph_id: int, query_vector, model: str, n: int = SIMILAR_QUESTIONS) -> list[Evidence]:
    """What the graph's most similar past questions (``n`` nearest, at least POSITIVE_SIMILARITY alike) say
    about notes: one ``scoring.Evidence`` per non-neutral ``answered`` edge. Raw SQL: a nearest-neighbour
    search over the partial HNSW index joined to the edges in one statement."""
    if query_vector is None:
        return []
    params = {
        "graph": graph_id,
        "query": vector_literal(query_vector),
        "n": n,
        "kind": QUESTION_KIND,
        "answered": ANSWERED,
        "model": model,
        "min_similarity": POSITIVE_SIMILARITY,
    }
    with transaction.atomic(savepoint=False), connection.cursor() as cur:
        _hnsw_settings(cur, n)
        cur.execute(QUESTION_EVIDENCE_SQL, params)
        return [
            Evidence(question_id=r[0], similarity=_finite(r[1]) or 0.0, node_id=r[2], weight=r[3], edge_id=r[4])
            for r in cur.fetchall()
        ]


# The links of the nodes %(frontier)s as written (each from its source): for each of those nodes, its top
# %(cap)s active links by stored weight (ties by id) to active nodes that are not questions (the learning's own
# nodes: their ``answered`` links are evidence, not context), with the link type's name and priority. By
# window function (row_number per source), where EXPAND_SQL takes each node's top links by LATERAL ... LIMIT.
OUT_LINKS_SQL = statement(
    """
SELECT ranked.id, ranked.source_id, ranked.target_id, ranked.weight, ranked.feedback_weight, et.name, et.priority
FROM (
    SELECT e.*, row_number() OVER (PARTITION BY e.source_id ORDER BY e.weight DESC, e.id) AS place
    FROM {edge} e
    JOIN {node} t ON t.id = e.target_id AND t.graph_id = %(graph)s
    WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.source_id = ANY(%(frontier)s::bigint[])
      AND NOT t.archived AND t.kind <> %(question)s
) ranked
JOIN {edgetype} et ON et.id = ranked.edge_type_id AND et.graph_id = %(graph)s
WHERE ranked.place <= %(cap)s
"""
)

# The backlinks of the nodes %(frontier)s: the links written to them, each walked from its target to its
# source; for each of those nodes its top %(cap)s by stored weight, to active nodes that are not questions.
# Rows as OUT_LINKS_SQL's, the second column the node walked from (the link's target), the third the node
# reached (its source).
BACKLINKS_SQL = statement(
    """
SELECT ranked.id, ranked.target_id, ranked.source_id, ranked.weight, ranked.feedback_weight, et.name, et.priority
FROM (
    SELECT e.*, row_number() OVER (PARTITION BY e.target_id ORDER BY e.weight DESC, e.id) AS place
    FROM {edge} e
    JOIN {node} s ON s.id = e.source_id AND s.graph_id = %(graph)s
    WHERE e.graph_id = %(graph)s AND NOT e.archived AND e.target_id = ANY(%(frontier)s::bigint[])
      AND NOT s.archived AND s.kind <> %(question)s
) ranked
JOIN {edgetype} et ON et.id = ranked.edge_type_id AND et.graph_id = %(graph)s
WHERE ranked.place <= %(cap)s
"""
)

# How many active links each of the nodes %(ids)s has, written from it or to it, whatever their other end
# (ranking.scoring.link_specificity reads it): a link from a node to itself counts at both ends; the links the
# learning writes itself (types %(learned)s: ``answered`` evidence, ``co_used``) are no authored link.
LINK_DEGREES_SQL = statement(
    """
SELECT n.id,
       count(e.id) FILTER (WHERE e.source_id = n.id) + count(e.id) FILTER (WHERE e.target_id = n.id) AS degree
FROM unnest(%(ids)s::bigint[]) AS n(id)
LEFT JOIN ({edge} e JOIN {edgetype} et ON et.id = e.edge_type_id AND et.name <> ALL(%(learned)s))
       ON e.graph_id = %(graph)s AND NOT e.archived AND (e.source_id = n.id OR e.target_id = n.id)
GROUP BY n.id
"""
)


def expansion(graph_id: int, start_nodes, query_vector, hops: int, cap: int) -> list[EdgeCandidate]:
    """The links expansion walks from ``start_nodes`` within ``hops``, both ways: what EXPAND_SQL's part 'e'
    gives (ranking.queries.expand's edges), one statement per level and direction.

    Level 1 walks the top ``cap`` links and the top ``cap`` backlinks of each start node; level n walks
    those of each node first reached at level n-1 (never one reached before: each node is walked from once,
    at its shortest depth). A link's ``reverse`` is true when walked from its target; ``source_id`` and
    ``target_id`` are the walk's from and to. Each with ``degrees`` (its ends' active links), the reached
    node's facts (``target``, NODE_ROWS_SQL) and its similarity to the query; ordered by level, stored
    weight (highest first), link id and direction (as written first), at most MAX_EDGE_CANDIDATES.
    """
    frontier, seen, walked = sorted(set(start_nodes)), set(start_nodes), []
    with connection.cursor() as cur:
        for level in range(1, hops + 1):
            if not frontier:
                break
            params = {"graph": graph_id, "frontier": frontier, "cap": cap, "question": QUESTION_KIND}
            for reverse, text in ((False, OUT_LINKS_SQL), (True, BACKLINKS_SQL)):
                cur.execute(text, params)
                walked += [(level, reverse, r) for r in cur.fetchall()]
            reached = {r[2] for lv, _reverse, r in walked if lv == level} - seen
            seen |= reached
            frontier = sorted(reached)
        ends = sorted({end for _level, _reverse, r in walked for end in (r[1], r[2])})
        cur.execute(LINK_DEGREES_SQL, {"graph": graph_id, "ids": ends, "learned": list(LEARNED_LINK_TYPES)})
        degree = dict(cur.fetchall())
    rows = {row.node_id: row for row in node_rows(graph_id, {r[2] for _level, _reverse, r in walked}, query_vector)}
    walked.sort(key=lambda w: (w[0], -w[2][3], w[2][0], w[1]))
    return [
        EdgeCandidate(
            edge_id=r[0],
            source_id=r[1],
            target_id=r[2],
            hops=level,
            weight=r[3],
            feedback_weight=r[4],
            edge_type=r[5],
            priority=r[6],
            similarity=rows[r[2]].vector,
            reverse=reverse,
            degrees=(degree[r[1]], degree[r[2]]),
            target=rows[r[2]],
        )
        for level, reverse, r in walked[:MAX_EDGE_CANDIDATES]
    ]
