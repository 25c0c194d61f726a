"""Retrieval, the pipeline's first stages: entry points, best-first expansion and node scores.

One request in: a ``RetrievalRequest`` (graphadmin_client: the object the serializers build, the client
sends and the MCP tools pass), built once by the caller, then ``prepare``d once (the policy and the query
vector resolved, ``Prepared``). Every stage takes that prepared request and nothing else about the
question: ``retrieve`` is the one pipeline behind search, context (ranking.context) and the MCP tools;
``search`` its top k; ``rank`` scores the edges around start nodes (the traversal view). Bad input raises
``RankingInputError`` with a dict of field -> messages, which the API turns into a 400; nothing here
writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import NamedTuple

from graphadmin.embeddings import check_comparable, configured_model, embed_query
from graphadmin.errors import InputError
from graphadmin.models import Graph, PolicyRevision
from graphadmin_client import RetrievalRequest

from . import queries as sql
from . import scoring

# Documented maxima (docs/ranking.md): bounded work per request.
MAX_START_NODES = 50
MAX_RANK_K = 500
MAX_SEARCH_K = 200
MAX_HOPS = 3
MAX_BUDGET_ITEMS = 200
MAX_BUDGET_TOKENS = 100_000
MAX_QUERY_CHARS = 4000


class RankingInputError(InputError):
    """Invalid input found after parsing (unknown nodes, hops above the policy's bound, ...)."""


def policy_of(graph: Graph) -> tuple[PolicyRevision, scoring.Policy]:
    """The graph's current policy revision and its ranking numbers."""
    revision = graph.current_policy()
    return revision, scoring.Policy.from_mapping(revision.numbers())


def query_vector(query: str = "", vector=None, graph: Graph | None = None):
    """The vector to compare with: the caller's vector, else the embedded query text, else None.

    A query text that gives the embedder nothing to embed (blank, or no token the model knows) has
    no vector, so it counts as no query. Query vectors come from a bounded per-process cache.
    With ``graph``, refuses (EmbeddingModelMismatch, a 409) to return a vector that would be compared
    with vectors of another model: the graph's stored vectors must all be the query's model (for a
    vector the caller sent, whose model is the caller's to vouch for: all of one model).
    """
    if vector is not None:
        if graph is not None:
            check_comparable(graph, query_model=None)
        return list(vector)
    if query and query.strip():
        v = embed_query(query)
        if v is not None:
            if graph is not None:
                check_comparable(graph, query_model=configured_model())
            return v
    return None


def query_model(vector=None) -> str:
    """What a query vector is recorded as: the configured model for embedded text, "" for a caller's vector."""
    return "" if vector is not None else configured_model()


@dataclass(frozen=True)
class Prepared:
    """One request with what every stage reads resolved once (``prepare``): the graph, the request, the policy
    revision and its ranking numbers, the query vector (None: nothing to compare by) and the clock (None: the
    time of scoring)."""

    graph: Graph
    request: RetrievalRequest
    revision: PolicyRevision
    policy: scoring.Policy
    qvec: list[float] | None
    now: datetime | None = None

    def asking(self, request: RetrievalRequest) -> Prepared:
        """The same resolution for another request with the same question (``search`` widening k)."""
        return replace(self, request=request)


def prepare(
    graph: Graph,
    request: RetrievalRequest,
    *,
    now: datetime | None = None,
    policy: tuple[PolicyRevision, scoring.Policy] | None = None,
    qvec=None,
) -> Prepared:
    """The request with its policy (``policy_of``) and query vector (``query_vector``) resolved, once for all the
    stages it goes through. ``policy`` and ``qvec`` given are used as they are (what-if's draft policy and a
    logged question's vector, the bench's fixed ones); ``now`` fixes the clock (tests, what-if)."""
    if qvec is None:
        qvec = query_vector(request.query, request.vector, graph)
    revision, pol = policy or policy_of(graph)
    return Prepared(graph, request, revision, pol, qvec, now)


def check_nodes(graph: Graph, ids, field_name: str) -> None:
    """Raise RankingInputError naming ``field_name`` and listing the ids that are not active nodes of the graph."""
    missing = sql.unknown_nodes(graph.pk, ids)
    if missing:
        raise RankingInputError({field_name: [f"Unknown or archived node(s) in this graph: {missing}"]})


def _check_hops(hops: int | None, policy: scoring.Policy) -> int:
    if hops is None:
        return policy.max_hops
    if hops > policy.max_hops:
        raise RankingInputError({"hops": [f"At most {policy.max_hops} (the policy's max_hops)."]})
    return hops


# ---------------------------------------------------------------------------------------------
# Rank (traversal)


@dataclass
class RankedEdge:
    """A scored edge with its target node, as returned by rank."""

    scored: scoring.Scored
    rank: int = 0

    @property
    def edge(self) -> scoring.EdgeCandidate:
        return self.scored.candidate

    @property
    def node_id(self) -> int:
        return self.edge.target_id


@dataclass
class RankResult:
    """The ranked edges (top k), the policy revision used and how many candidates were considered."""

    policy_revision: PolicyRevision
    items: list[RankedEdge]
    considered: int


def rank(prepared: Prepared) -> RankResult:
    """Every candidate edge within the request's ``hops`` of its start nodes, scored and ranked; the top k returned."""
    graph, req, revision, policy = prepared.graph, prepared.request, prepared.revision, prepared.policy
    hops = _check_hops(req.hops, policy)
    start_nodes = list(req.start_nodes)
    check_nodes(graph, start_nodes, "start_nodes")
    edges = sql.edge_candidates(graph.pk, start_nodes, prepared.qvec, hops, revision.fanout_cap)
    ranked = scoring.rank_edges(edges, policy)
    items = [RankedEdge(s, rank=p) for p, s in enumerate(ranked[: req.k], start=1)]
    return RankResult(revision, items, considered=len(edges))


# ---------------------------------------------------------------------------------------------
# The retrieval pipeline (behind search, context and the MCP tools)

# Bounded work per request (docs/ranking.md "The retrieval pipeline").
# The pool: each side gives up to the request's k entry points (50 by default, at
# most MAX_SEARCH_K), so a demoted note has replacements; triplets as deep as the node side's default.
TRIPLET_K = 50  # triplet entry points (edges by their "source -> type -> target" embedding)
EXPANSION_SEEDS = 10  # the best entry points expansion grows from (start nodes always)
MAX_EXPANDED = 50  # new nodes best-first expansion may add
EXPANSION_FANOUT = (
    10  # links, and backlinks, per reached node expansion considers (its top by weight; fanout_cap bounds it too)
)
MAX_EXCLUDE = 1000
# Tie-break between two equally good ways in: a start node is the caller's; then a triplet hit, so a
# node that is also an end of a matching link carries that link as its path (its use credits the
# link, and a reinforced link lifts the node for questions that match it); then a plain vector hit.
ENTRY_ORDER = {"start": 0, "triplet": 1, "vector": 2, "lexical": 3, "expansion": 4, "memory": 5}


@dataclass
class Candidate:
    """A retrieval candidate: a node, how it entered, the path from its entry point, and its score.

    ``entry`` is ``start`` (a start node), ``vector`` (a node embedding hit), ``lexical`` (a BM25 hit on
    the query's words), ``triplet`` (an end of an edge whose triplet embedding was hit; that edge is its
    path), ``expansion`` (reached from an entry point along ``path``) or ``memory`` (brought in by similar
    questions' evidence). ``edge`` is the last edge of the path (its traversal score), if any.
    """

    scored: scoring.Scored
    row: sql.NodeRow
    entry: str
    path: tuple[int, ...] = ()
    edge: scoring.Scored | None = None
    path_hops: int = 0
    rank: int = 0
    evidence: list = field(default_factory=list)  # scoring.Evidence rows behind ``memory``
    bm25: float = 0.0  # the node's BM25 for the query (0: none of its words), before fusion

    @property
    def node_id(self) -> int:
        return self.row.node_id

    @property
    def edge_id(self) -> int | None:
        return self.path[-1] if self.path else None

    @property
    def edge_type(self) -> str | None:
        return self.edge.candidate.edge_type if self.edge else None

    def features(self) -> dict:
        """The raw inputs of the score and how the candidate was reached, frozen in the injection log
        (explain shows them, what-if rescores them)."""
        c = self.scored.candidate
        edge = self.edge.candidate if self.edge else None
        return {
            "node_id": c.node_id,
            "vector": c.vector,
            "hops": c.hops,
            "age_days": c.age_days,
            "persona": c.persona,
            "feedback_weight": c.feedback_weight,
            "path_weight": c.path_weight,
            "priority": c.priority,
            "novelty": c.novelty,
            "memory": c.memory,
            "lexical": c.lexical,
            "bm25": self.bm25,
            "tokens": self.row.tokens,
            "entry": self.entry,
            "path": list(self.path),
            "path_hops": self.path_hops,
            "edge_id": edge.edge_id if edge else None,
            "edge_type": edge.edge_type if edge else None,
            "edge_source": edge.source_id if edge else None,
            "edge_target": edge.target_id if edge else None,
            "traversal": self.edge.total if self.edge else None,
            "reverse": edge.reverse if edge else None,
            "specificity": edge.specificity if edge else None,
            "inherited": c.inherited,
            "evidence": [[e.question_id, e.similarity, e.weight, e.edge_id] for e in self.evidence],
        }


@dataclass
class SearchResult:
    """Ranked candidates (best first) and the policy revision used; ``considered`` counts them all."""

    policy_revision: PolicyRevision
    items: list[Candidate]
    considered: int = 0


def retrieve(prepared: Prepared) -> SearchResult:
    """The one retrieval pipeline: entry points, best-first expansion, node scores, in rank order.

    ``prepared`` (``prepare``) says what is asked, with the policy and the query vector to use.
    1. Entry points (one statement, ranking.queries.ENTRY_SQL, with the similar questions' evidence):
       the top ``k`` nodes by embedding, the top ``k`` nodes by BM25 on the query's words
       (only when the policy's coef_lexical is not 0) and the top TRIPLET_K
       triplets (a triplet hit brings both ends, with that edge as their path), plus the start nodes.
       Vector and BM25 are fused into the node score's ``vector`` and ``lexical`` raws
       (scoring.fuse_entry: a weighted sum of per-query-normalised scores, or reciprocal-rank fusion).
    2. Expansion (one statement, EXPAND_SQL, with the notes evidence brings and the BM25 of all):
       best-first by carried relevance (scoring.spread) from the start nodes and the best EXPANSION_SEEDS
       entry points, up to ``hops`` (the policy's max_hops) and MAX_EXPANDED new nodes, over each
       node's top EXPANSION_FANOUT links and top EXPANSION_FANOUT backlinks by weight (and at most the
       policy's ``fanout_cap``), never to a question node.
    3. Every node reached is scored (``scoring.NodeScores``); a node reached several ways keeps its
       best. Its hops are the edges from its entry point or, with anchors, its distance from them; what
       its path carried is its ``graph`` component.
    4. ``exclude`` (ids the caller already holds) are dropped from the result (they still expand).
    Writes nothing. Bad input raises RankingInputError naming the field.
    """
    graph, req, revision = prepared.graph, prepared.request, prepared.revision
    run = _Run(
        graph, req, list(dict.fromkeys(req.start_nodes)), set(req.exclude), revision, prepared.policy, prepared.qvec
    )
    entry = _entry_points(run)
    hops = _check_request(run, entry)
    now = prepared.now or datetime.now(UTC)
    pool = _pool_from_entry(run, entry)
    seeds = _expansion_seeds(run, pool, now)
    # The answered edges of past questions that asked the same thing (the graph's derived similarity).
    recall = scoring.recall_questions(entry.evidence, graph.evidence_similarity)
    _expand_and_bring(run, pool, seeds, hops, recall)
    ranked = _score_pool(run, pool, recall, now)
    return SearchResult(revision, ranked, considered=len(ranked))


@dataclass
class _Run:
    """What one retrieval is asked and with which policy (fixed for the whole call)."""

    graph: Graph
    req: RetrievalRequest
    start_nodes: list[int]
    exclude: set[int]
    revision: PolicyRevision
    pol: scoring.Policy
    qvec: object
    qtext: str | None = None
    scores: scoring.NodeScores | None = None

    def __post_init__(self) -> None:
        self.qtext = sql.vector_literal(self.qvec)  # rendered once for both statements
        self.scores = scoring.NodeScores(self.pol)  # the policy's coefficients and hop factors, read once


@dataclass
class _Pool:
    """The candidates found so far: their facts, the ways each was reached, and their BM25."""

    rows: dict[int, sql.NodeRow]
    lexical: dict[int, float]  # the lexical side's hits (then every candidate's BM25, when lexical is on)
    bm25: dict[int, float]  # the BM25 of every node read so far that has one
    ways: dict[int, list[tuple]] = field(default_factory=dict)  # node id -> [(entry, Reach)]
    facts: dict[int, tuple] = field(default_factory=dict)  # node id -> (age days, persona affinity), see _facts

    def way(self, node_id: int, entry: str, reach: scoring.Reach) -> None:
        self.ways.setdefault(node_id, []).append((entry, reach))


def _entry_points(run: _Run):
    """Entry points (vector, triplet, lexical), the similar questions' evidence and the facts of every
    node they name and of the start nodes: one statement (ranking.queries.ENTRY_SQL)."""
    req, pol = run.req, run.pol
    return sql.retrieval_entry(
        run.graph.pk,
        run.qtext,
        text=req.query,
        config=run.graph.text_search_config,
        k=req.k,
        k_triplets=TRIPLET_K,
        lexical=bool(pol.coef_lexical and req.query),
        evidence=bool(pol.exploration or pol.coef_memory),
        model=query_model(req.vector),
        starts=run.start_nodes,
    )


def _check_request(run: _Run, entry) -> int:
    """Raise RankingInputError for a request with nothing to search by, hops above the policy's bound,
    or unknown start nodes or anchors; return the hops to expand."""
    if run.qvec is None and not run.start_nodes and not entry.lexical:
        raise RankingInputError({"query": ["Give a query with searchable words, a vector, or start nodes."]})
    hops = _check_hops(run.req.hops, run.pol)
    unknown = sorted({n for n in run.start_nodes if n not in entry.rows})
    if unknown:
        raise RankingInputError({"start_nodes": [f"Unknown or archived node(s) in this graph: {unknown}"]})
    if run.req.anchors:
        check_nodes(run.graph, list(run.req.anchors), "anchors")
    return hops


def _pool_from_entry(run: _Run, entry) -> _Pool:
    """The pool after the entry statement: vector, lexical and triplet hits and the start nodes."""
    pool = _Pool(rows={n: entry.rows[n] for n in entry.hits}, lexical=dict(entry.lexical), bm25=dict(entry.bm25))
    at_entry: dict[int, scoring.Reach] = {}  # a node entered several ways without an edge: one Reach (equal values)
    for side, node_ids in (("vector", entry.hits), ("lexical", pool.lexical), ("start", run.start_nodes)):
        for node_id in node_ids:
            reach = at_entry.get(node_id) or at_entry.setdefault(node_id, scoring.Reach(node_id, 0))
            pool.way(node_id, side, reach)
    rows = pool.rows
    for node_id, row in entry.rows.items():
        rows.setdefault(node_id, row)  # start nodes, lexical hits and triplet ends
    coefficients = scoring.edge_coefficients(run.pol)
    for t in entry.triplets:
        # A triplet hit is scored as the link it is, its semantic part the target's own similarity.
        similarity = rows[t.target_id].vector if t.target_id in rows else None
        edge = scoring.score_edge(replace(t, similarity=similarity), run.pol, coefficients)
        for end in (t.source_id, t.target_id):
            if end in rows:
                pool.way(end, "triplet", scoring.Reach(end, 0, (t.edge_id,), edge))
    return pool


def _expansion_seeds(run: _Run, pool: _Pool, now: datetime) -> dict[int, tuple[scoring.Reach, float]]:
    """Seeds of the expansion: the start nodes and the best entry points by a provisional score, each with
    its relevance where it entered (``NodeScores.relevance`` at hop 0: what its links may carry on)."""
    rows, ways, pol = pool.rows, pool.ways, run.pol
    fused = scoring.fuse_entry({n: r.vector for n, r in rows.items()}, pool.lexical, pol.rrf_k)
    scores = run.scores
    provisional = {}  # node id -> its sort key (scoring.sort_key)
    bases = {}
    for n, options in ways.items():
        if n in rows:
            age, affinity = _facts(run, pool, n, now)
            base = bases[n] = scores.base(*fused[n], affinity, age, rows[n].feedback_weight, None, None)
            provisional[n] = _best(scores, n, options, base).key
    seeds: dict[int, tuple[scoring.Reach, float]] = {
        n: (scoring.Reach(n, 0), scores.relevance(bases[n], 0)) for n in run.start_nodes if n in rows
    }
    for n in sorted(provisional, key=provisional.__getitem__):
        if len(seeds) >= len(run.start_nodes) + EXPANSION_SEEDS:
            break
        if n not in seeds:  # expansion grows from the node itself
            seeds[n] = (min(ways[n], key=lambda w: len(w[1].path))[1], scores.relevance(bases[n], 0))
    return seeds


def _expand_and_bring(run: _Run, pool: _Pool, seeds: dict[int, tuple[scoring.Reach, float]], hops: int, recall) -> None:
    """Add to the pool the nodes best-first expansion reaches and the notes similar questions' evidence brings."""
    rows = pool.rows
    # Discovery: a note similar questions' agents used joins the pool even when no entry side found it.
    may_bring = sorted(n for n, m in recall.memory.items() if m > 0 and n not in rows and n not in run.exclude)
    extra_rows: dict[int, sql.NodeRow] = {}
    if (seeds and hops) or may_bring:
        # One statement: the expansion, the facts of the notes evidence may bring, and the BM25 of both.
        # At most 50 new nodes are taken, so each node's top EXPANSION_FANOUT links each way by weight are
        # plenty to choose from (the full fan-out of 10 seeds over 2 hops would be up to 25,000 rows).
        edges, extra_rows, more_bm25 = sql.expand(
            run.graph.pk,
            list(seeds) if hops else [],
            run.qtext,
            hops or 1,
            min(run.revision.fanout_cap, EXPANSION_FANOUT),
            extra=may_bring,
            text=run.req.query,
            config=run.graph.text_search_config,
            lexical=bool(pool.lexical),
        )
        pool.bm25.update(more_bm25)
        if seeds and hops:
            edges = _with_specificity(edges)
            scored_edges = scoring.score_edges(edges, run.pol)
            targets = {e.target_id: e.target for e in edges}
            match = _match(run, pool, targets)
            found = scoring.spread(seeds, scored_edges, match, run.scores, hops, MAX_EXPANDED, set(run.start_nodes))
            for node_id, reach in found.items():
                rows.setdefault(node_id, targets[node_id])
                pool.way(node_id, "expansion", reach)
    brought = [n for n in may_bring if n not in rows and n in extra_rows]
    for node_id in brought:
        rows[node_id] = extra_rows[node_id]
        pool.way(node_id, "memory", scoring.Reach(node_id, 0))


def _with_specificity(edges: list[scoring.EdgeCandidate]) -> list[scoring.EdgeCandidate]:
    """The expansion's links with their specificity (``scoring.link_specificity``), the reference degree being
    the median degree of the nodes they join: what is ordinary in this neighbourhood of the graph."""
    degrees = {}
    for e in edges:
        degrees[e.source_id], degrees[e.target_id] = e.degrees
    known = sorted(d for d in degrees.values() if d)
    if not known:
        return edges
    reference = known[len(known) // 2]
    return [
        replace(e, specificity=scoring.link_specificity(*e.degrees, reference)) if all(e.degrees) else e for e in edges
    ]


def _match(run: _Run, pool: _Pool, targets: dict) -> dict[int, float]:
    """The vector and lexical contributions of every node the expansion's links reach (its own match to the
    query, before hops): the cosine, and the BM25 over the query's best (the lexical side's top hit), as the
    weighted-sum fusion gives them (``scoring.fuse_entry``; with reciprocal-rank fusion a provisional figure
    for the order of the walk: the final scores fuse by rank)."""
    coef_vector, coef_lexical = run.scores.coefficients[0], run.scores.coefficients[1]
    best = max(pool.lexical.values(), default=0.0) if pool.lexical else 0.0
    match = {}
    for node_id, row in targets.items():
        lexical = pool.bm25.get(node_id, 0.0) / best if best > 0 else 0.0
        match[node_id] = coef_vector * (row.vector or 0.0) + coef_lexical * lexical
    return match


def _score_pool(run: _Run, pool: _Pool, recall, now: datetime) -> list[Candidate]:
    """Every candidate not excluded, scored by its best way in, in rank order (ranks set)."""
    rows, lexical, pol = pool.rows, pool.lexical, run.pol
    anchors = list(run.req.anchors)
    distances = sql.anchor_distances(run.graph.pk, anchors, list(rows), pol.max_hops) if anchors else None
    if lexical:
        # BM25 of the candidates the lexical top k missed (expansion, vector, triplet and memory), so
        # every candidate's lexical raw is its own score, not 0 for being ranked 51st.
        lexical.update({n: pool.bm25[n] for n in rows if n not in lexical and n in pool.bm25})
    fused = scoring.fuse_entry({n: r.vector for n, r in rows.items()}, lexical, pol.rrf_k)
    # Exploration only where a near-repeat's context failed: a question with no such history gets the best ranking.
    novelty = {n: 1.0 for n in rows if recall.failed and recall.novel(n)}
    scores = run.scores
    keyed = []
    for node_id, options in pool.ways.items():
        if node_id in run.exclude or node_id not in rows:
            continue
        row, (vector, lexical_raw) = rows[node_id], fused[node_id]
        age, affinity = _facts(run, pool, node_id, now)
        memory, novel = recall.memory.get(node_id), novelty.get(node_id)
        base = scores.base(vector, lexical_raw, affinity, age, row.feedback_weight, memory, novel)
        anchor_hops = distances.get(node_id) if distances is not None else None
        key, total, (hops, weight, priority, inherited), (entry, reach) = _best(
            scores, node_id, options, base, distances is not None, anchor_hops
        )
        candidate = scoring.NodeCandidate(
            node_id=node_id,
            vector=vector,
            lexical=lexical_raw,
            hops=hops,
            age_days=age,
            persona=affinity,
            feedback_weight=row.feedback_weight,
            path_weight=weight,
            priority=priority,
            novelty=novel,
            memory=memory,
            inherited=inherited,
        )
        scored = scores.scored(candidate, scores.raws(base, hops, weight, priority, inherited), total)
        keyed.append(
            (
                key,
                Candidate(
                    scored,
                    row,
                    entry,
                    reach.path,
                    reach.via,
                    reach.hops,
                    evidence=recall.rows.get(node_id, []),
                    bm25=lexical.get(node_id, 0.0),
                ),
            )
        )
    keyed.sort(key=lambda kc: kc[0])  # scoring.sort_key; one candidate per node: the node id decides ties
    ranked = [c for _key, c in keyed]
    for p, c in enumerate(ranked, start=1):
        c.rank = p
    return ranked


def _facts(run: _Run, pool: _Pool, node_id: int, now: datetime) -> tuple:
    """A node's score inputs that do not depend on the way it was reached: (age in days or None, the
    caller's persona affinity); computed once per node and call."""
    facts = pool.facts.get(node_id)
    if facts is None:
        row = pool.rows[node_id]
        age = (now - row.touched_at).total_seconds() / 86400.0 if row.touched_at else None
        facts = pool.facts[node_id] = (age, scoring.persona_affinity(row.kind, row.tags, run.req.persona or {}))
    return facts


def _path_of(reach: scoring.Reach) -> tuple:
    """(path weight, priority) of a way in: the last edge's reinforcement weight and type priority, or
    (None, 0.0) without one. The link's reinforcement weight alone (uses, negatives, decay): its outcome
    EMA rises with how often the link is shown, like a node's (scoring.NodeScores), and lifted every
    note at its ends."""
    if reach.via is None:
        return None, 0.0
    e = reach.via.candidate
    return e.weight, e.priority


# NamedTuples on the hot path: docs/decisions/0007-positional-hot-tuples.md
class WayIn(NamedTuple):
    """What a way in gives the node score (``scoring.NodeScores.way`` reads them in this order)."""

    hops: int | None  # from its entry point, or with anchors its distance from them
    path_weight: float | None  # the last edge's reinforcement weight (None: no edge)
    priority: float  # the last edge's type priority (0.0: no edge)
    inherited: float | None  # the relevance its path carried (None: an entry point)


class Best(NamedTuple):
    """The best-scoring way a node was reached (``_best``)."""

    key: tuple  # scoring.node_key: the SortKey's fields, a plain tuple
    total: float
    way_in: WayIn
    chosen: tuple[str, scoring.Reach]  # (its entry, its Reach)


def _best(scores: scoring.NodeScores, node_id: int, options, base, anchored=False, anchor_hops=None) -> Best:
    """The best-scoring way a node was reached, by sort key, then ENTRY_ORDER (the first of equals). ``base``:
    the node's terms that do not depend on the way in (scoring.NodeScores.base).

    Ways in differ only in the contributions of their hop, path, priority and graph lift: ways with the same
    hops and the same three other contributions have the same total (math.fsum is exact, so a zero's sign does
    not change a non-zero sum) and are summed once. A total of zero is summed for each way, its sign being the
    way's own."""
    if len(options) == 1:  # most nodes are reached one way: nothing to compare
        entry, reach = options[0]
        way_in = WayIn(anchor_hops if anchored else reach.hops, *_path_of(reach), reach.inherited)
        total = scores.total(base, scores.way(*way_in, base))
        return Best(scoring.node_key(total, way_in.hops, node_id), total, way_in, (entry, reach))
    # The hottest loop: plain tuples read by index (``alike``: WayIn's fields; ``way``: NodeScores.way's hop, path,
    # priority and graph contributions), named once for the way kept (docs/decisions/0007-positional-hot-tuples.md).
    best = None
    done: dict[tuple, tuple] = {}  # (hops, path, priority and graph contributions) -> (sort key, total)
    for entry, reach in options:
        alike = (anchor_hops if anchored else reach.hops, *_path_of(reach), reach.inherited)
        way = scores.way(*alike, base)
        same = (alike[0], way[1], way[2], way[3])
        scored = done.get(same)
        if scored is None or not scored[1]:
            total = scores.total(base, way)
            scored = done[same] = (scoring.node_key(total, alike[0], node_id), total)
        order = (scored[0], ENTRY_ORDER[entry])
        if best is None or order < best[0]:
            best = (order, scored[1], alike, (entry, reach))
    return Best(best[0][0], best[1], WayIn(*best[2]), best[3])


def search(prepared: Prepared) -> SearchResult:
    """The retrieval pipeline's top ``k`` candidates (``retrieve`` over at least 50), without a budget or a log."""
    req = prepared.request
    result = retrieve(prepared.asking(replace(req, k=max(req.k, 50))))
    result.items = result.items[: req.k]
    return result
