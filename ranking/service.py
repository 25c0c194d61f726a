"""The ranking service: fetch candidates (ranking.queries), score them (ranking.scoring), log injections.

The REST API, the dashboard and the MCP tool all call these functions. Bad input raises
``RankingInputError`` with a dict of field -> messages, which the API turns into a 400; nothing
is written before every check has passed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import transaction

from feedback.models import AgentSession, ContextInjection, InjectionCandidate, UseEvent
from graphadmin.embeddings import check_comparable, configured_model, embed_query
from graphadmin.errors import InputError
from graphadmin.models import Edge, EdgeType, Graph, Node, PolicyRevision
from graphadmin.tenancy import require_session

from . import queries as sql
from . import scoring

# Documented maxima (docs/ranking.md): bounded work per request.
MAX_START_NODES = 50
MAX_RANK_K = 500
MAX_SEARCH_K = 200
MAX_HOPS = 3
MAX_BUDGET_ITEMS = 200
MAX_BUDGET_TOKENS = 100_000
MAX_WHATIF_INJECTIONS = 200
MAX_WHATIF_PRIORITIES = 200  # draft edge-type priorities per what-if
MAX_QUERY_CHARS = 4000
USED_SIGNALS = ("explicit", "implicit")


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
    """A scored edge with its target node, as returned by rank and logged by context."""

    scored: scoring.Scored
    row: sql.EdgeRow
    rank: int = 0

    @property
    def node_id(self) -> int:
        return self.row.target_id

    def features(self) -> dict:
        """The raw inputs of the score, frozen in the injection log so what-if can rescore them."""
        r = self.row
        return {
            "edge_id": r.edge_id,
            "source_id": r.source_id,
            "target_id": r.target_id,
            "hops": r.hops,
            "weight": r.weight,
            "feedback_weight": r.feedback_weight,
            "edge_type": r.edge_type,
            "priority": r.priority,
            "similarity": r.similarity,
            "tokens": r.tokens,
        }


@dataclass
class RankResult:
    """The ranked edges (top k), the policy revision used and how many candidates were considered."""

    policy_revision: PolicyRevision
    items: list[RankedEdge]
    considered: int


def _edge_candidate(r: sql.EdgeRow) -> scoring.EdgeCandidate:
    return scoring.EdgeCandidate(
        edge_id=r.edge_id,
        source_id=r.source_id,
        target_id=r.target_id,
        hops=r.hops,
        weight=r.weight,
        feedback_weight=r.feedback_weight,
        priority=r.priority,
        similarity=r.similarity,
        edge_type=r.edge_type,
    )


def rank(
    graph: Graph, start_nodes, *, query: str = "", vector=None, k: int = 50, hops: int | None = None
) -> RankResult:
    """Every candidate edge within ``hops`` of the start nodes, scored and ranked; the top k returned."""
    qvec = query_vector(query, vector, graph)
    revision, policy = policy_of(graph)
    hops = _check_hops(hops, policy)
    check_nodes(graph, start_nodes, "start_nodes")
    rows = sql.edge_candidates(graph.pk, start_nodes, qvec, hops, revision.fanout_cap)
    by_id = {r.edge_id: r for r in rows}
    ranked = scoring.rank_edges((_edge_candidate(r) for r in rows), policy)
    items = [RankedEdge(s, by_id[s.candidate.edge_id], rank=p) for p, s in enumerate(ranked[:k], start=1)]
    return RankResult(revision, items, considered=len(rows))


# ---------------------------------------------------------------------------------------------
# The retrieval pipeline (behind search, context and the MCP tools)

# Bounded work per request (docs/ranking.md "The retrieval pipeline").
TRIPLET_K = 20  # triplet entry points (edges by their "source -> type -> target" embedding)
EXPANSION_SEEDS = 10  # the best entry points expansion grows from (start nodes always)
MAX_EXPANDED = 50  # new nodes best-first expansion may add
EXPANSION_FANOUT = (
    10  # out-edges per reached node expansion considers (its top by weight; the policy's fanout_cap bounds it too)
)
MAX_EXCLUDE = 1000
# Tie-break between two equally good ways in: a start node is the caller's; then a triplet hit, so a
# node that is also an end of a matching link carries that link as its path (its use credits the
# link, and a reinforced link lifts the node for questions that match it); then a plain vector hit.
ENTRY_ORDER = {"start": 0, "triplet": 1, "vector": 2, "expansion": 3, "memory": 4}


@dataclass
class Candidate:
    """A retrieval candidate: a node, how it entered, the path from its entry point, and its score.

    ``entry`` is ``start`` (a start node), ``vector`` (a node embedding hit), ``triplet`` (an end of
    an edge whose triplet embedding was hit; that edge is its path), ``expansion`` (reached from
    an entry point along ``path``) or ``memory`` (brought in by similar questions' evidence). ``edge``
    is the last edge of the path (its traversal score), if any.
    """

    scored: scoring.Scored
    row: sql.NodeRow
    entry: str
    path: tuple[int, ...] = ()
    edge: scoring.Scored | None = None
    path_hops: int = 0
    rank: int = 0
    evidence: list = field(default_factory=list)  # scoring.Evidence rows behind ``memory``

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
            "tokens": self.row.tokens,
            "entry": self.entry,
            "path": list(self.path),
            "path_hops": self.path_hops,
            "edge_id": edge.edge_id if edge else None,
            "edge_type": edge.edge_type if edge else None,
            "edge_source": edge.source_id if edge else None,
            "edge_target": edge.target_id if edge else None,
            "traversal": self.edge.total if self.edge else None,
            "evidence": [[e.question_id, e.similarity, e.weight, e.edge_id] for e in self.evidence],
        }


@dataclass
class SearchResult:
    """Ranked candidates (best first) and the policy revision used; ``considered`` counts them all."""

    policy_revision: PolicyRevision
    items: list[Candidate]
    considered: int = 0


def _triplet_edge(t: sql.TripletRow, similarity: float | None) -> scoring.EdgeCandidate:
    return scoring.EdgeCandidate(
        edge_id=t.edge_id,
        source_id=t.source_id,
        target_id=t.target_id,
        hops=1,
        weight=t.weight,
        feedback_weight=t.feedback_weight,
        priority=t.priority,
        similarity=similarity,
        edge_type=t.edge_type,
    )


def _row_of_edge(r: sql.EdgeRow) -> sql.NodeRow:
    return sql.NodeRow(
        node_id=r.target_id,
        key=r.target_key,
        title=r.target_title,
        kind=r.target_kind,
        tags=list(r.target_tags),
        vector=r.similarity,
        touched_at=r.target_touched_at,
        tokens=r.tokens,
        feedback_weight=r.target_feedback_weight,
    )


def retrieve(
    graph: Graph,
    *,
    query: str = "",
    vector=None,
    start_nodes=(),
    anchors=(),
    exclude=(),
    persona=None,
    k: int = 50,
    hops: int | None = None,
    now: datetime | None = None,
    policy: tuple[PolicyRevision, scoring.Policy] | None = None,
    qvec=None,
) -> SearchResult:
    """The one retrieval pipeline: entry points, best-first expansion, node scores, in rank order.

    1. Entry points: the top ``k`` nodes by embedding and the top TRIPLET_K triplets (a triplet hit
       brings both ends, with that edge as their path), plus the start nodes.
    2. Expansion: best-first by traversal score from the start nodes and the best EXPANSION_SEEDS
       entry points, up to ``hops`` (the policy's max_hops) and MAX_EXPANDED new nodes, over each
       node's top EXPANSION_FANOUT out-edges by weight (and at most the policy's ``fanout_cap``).
    3. Every node reached is scored (``scoring.score_node``); a node reached several ways keeps its
       best. Its hops are the edges from its entry point or, with anchors, its distance from them.
    4. ``exclude`` (ids the caller already holds) are dropped from the result (they still expand).
    Writes nothing. Bad input raises RankingInputError naming the field.
    """
    start_nodes, anchors, exclude = list(dict.fromkeys(start_nodes or ())), list(anchors or ()), set(exclude or ())
    if qvec is None:
        qvec = query_vector(query, vector, graph)
    if qvec is None and not start_nodes:
        raise RankingInputError({"query": ["Give a query with searchable words, a vector, or start nodes."]})
    revision, pol = policy or policy_of(graph)
    now = now or datetime.now(UTC)
    hops = _check_hops(hops, pol)
    if start_nodes:
        check_nodes(graph, start_nodes, "start_nodes")
    if anchors:
        check_nodes(graph, anchors, "anchors")

    rows: dict[int, sql.NodeRow] = {}
    ways: dict[int, list[tuple]] = {}  # node id -> [(entry, Reach)]

    def way(node_id: int, entry: str, reach: scoring.Reach) -> None:
        ways.setdefault(node_id, []).append((entry, reach))

    qtext = sql.vector_literal(qvec)  # rendered once for every statement below
    node_hits, triplets = sql.entry_points(graph.pk, qtext, k, TRIPLET_K) if qvec is not None else ([], [])
    for r in node_hits:
        rows[r.node_id] = r
        way(r.node_id, "vector", scoring.Reach(r.node_id, 0))
    for node_id in start_nodes:
        way(node_id, "start", scoring.Reach(node_id, 0))
    missing = {n for n in start_nodes if n not in rows} | {
        end for t in triplets for end in (t.source_id, t.target_id) if end not in rows
    }
    for r in sql.node_rows(graph.pk, missing, qtext):
        rows[r.node_id] = r
    for t in triplets:
        for end in (t.source_id, t.target_id):
            if end in rows:
                edge = scoring.score_edge(
                    _triplet_edge(t, rows[t.target_id].vector if t.target_id in rows else None), pol
                )
                way(end, "triplet", scoring.Reach(end, 0, (t.edge_id,), edge))

    # Seeds of the expansion: the start nodes and the best entry points by a provisional score.
    provisional = {n: _best(n, ways[n], rows[n], pol, persona, now, None, None)[0] for n in ways if n in rows}
    seeds: dict[int, scoring.Reach] = {n: scoring.Reach(n, 0) for n in start_nodes if n in rows}
    for n in sorted(provisional, key=lambda n: scoring.sort_key(provisional[n])):
        if len(seeds) >= len(start_nodes) + EXPANSION_SEEDS:
            break
        seeds.setdefault(n, min(ways[n], key=lambda w: len(w[1].path))[1])  # expansion grows from the node itself
    if seeds and hops:
        # At most 50 new nodes are taken, so each node's top EXPANSION_FANOUT out-edges by weight are
        # plenty to choose from (the full fan-out of 10 seeds over 2 hops would be up to 25,000 rows).
        edge_rows = sql.edge_candidates(graph.pk, list(seeds), qtext, hops, min(revision.fanout_cap, EXPANSION_FANOUT))
        scored_edges = [scoring.score_edge(_edge_candidate(r), pol) for r in edge_rows]
        targets = {r.target_id: r for r in edge_rows}
        for node_id, reach in scoring.expand_best_first(seeds, scored_edges, hops, MAX_EXPANDED).items():
            rows.setdefault(node_id, _row_of_edge(targets[node_id]))
            way(node_id, "expansion", reach)

    distances = sql.anchor_distances(graph.pk, anchors, list(rows), pol.max_hops) if anchors else None
    # Question-conditional evidence: the answered edges of similar past questions (ledger state).
    recall = scoring.recall_questions(
        sql.question_evidence(graph.pk, qtext, query_model(vector)) if (pol.exploration or pol.coef_memory) else ()
    )
    # Discovery: a note similar questions' agents used joins the pool even when no entry side found it.
    brought = sorted(n for n, m in recall.memory.items() if m > 0 and n not in rows and n not in exclude)
    for r in sql.node_rows(graph.pk, brought, qtext) if brought else ():
        rows[r.node_id] = r
        way(r.node_id, "memory", scoring.Reach(r.node_id, 0))
    if distances is not None and brought:
        distances.update(sql.anchor_distances(graph.pk, anchors, brought, pol.max_hops))
    # Exploration only where a near-repeat's context failed: a question with no such history gets the best ranking.
    novelty = {n: 1.0 for n in rows if recall.failed and recall.novel(n)}
    memory = recall.memory
    candidates = []
    for node_id, options in ways.items():
        if node_id in exclude or node_id not in rows:
            continue
        anchor_hops = distances.get(node_id) if distances is not None else None
        scored, (entry, reach) = _best(
            node_id,
            options,
            rows[node_id],
            pol,
            persona,
            now,
            novelty.get(node_id),
            memory.get(node_id),
            distances is not None,
            anchor_hops,
        )
        candidates.append(
            Candidate(
                scored, rows[node_id], entry, reach.path, reach.via, reach.hops, evidence=recall.rows.get(node_id, [])
            )
        )
    ranked = sorted(
        candidates, key=lambda c: scoring.sort_key(c.scored)
    )  # one candidate per node: the stable id decides ties
    for p, c in enumerate(ranked, start=1):
        c.rank = p
    return SearchResult(revision, ranked, considered=len(ranked))


def _best(
    node_id,
    options,
    row: sql.NodeRow,
    policy: scoring.Policy,
    persona,
    now,
    novelty,
    memory=None,
    anchored=False,
    anchor_hops=None,
):
    """The best-scoring way a node was reached: (its Scored, (entry, Reach))."""
    age = (now - row.touched_at).total_seconds() / 86400.0 if row.touched_at else None
    affinity = scoring.persona_affinity(row.kind, row.tags, persona or {})
    best = None
    for entry, reach in options:
        weight, priority = None, 0.0
        if reach.via is not None:
            e = reach.via.candidate
            # The link's reinforcement weight alone (uses, negatives, decay): its outcome EMA rises with
            # how often the link is shown, like a node's (scoring.score_node), and lifted every note at its ends.
            weight, priority = e.weight, e.priority
        cand = scoring.NodeCandidate(
            node_id=node_id,
            vector=row.vector or 0.0,
            hops=anchor_hops if anchored else reach.hops,
            age_days=age,
            persona=affinity,
            feedback_weight=row.feedback_weight,
            path_weight=weight,
            priority=priority,
            novelty=novelty,
            memory=memory,
        )
        scored = scoring.score_node(cand, policy)
        if len(options) == 1:  # most nodes are reached one way: nothing to compare
            return scored, (entry, reach)
        key = (scoring.sort_key(scored), ENTRY_ORDER[entry])
        if best is None or key < best[0]:
            best = (key, scored, (entry, reach))
    return best[1], best[2]


def search(
    graph: Graph,
    *,
    query: str = "",
    vector=None,
    k: int = 20,
    anchors=(),
    start_nodes=(),
    exclude=(),
    persona=None,
    now: datetime | None = None,
    policy: tuple[PolicyRevision, scoring.Policy] | None = None,
) -> SearchResult:
    """The retrieval pipeline's top ``k`` candidates (``retrieve``), without a budget or a log."""
    result = retrieve(
        graph,
        query=query,
        vector=vector,
        start_nodes=start_nodes,
        anchors=anchors,
        exclude=exclude,
        persona=persona,
        k=max(k, 50),
        now=now,
        policy=policy,
    )
    result.items = result.items[:k]
    return result


# ---------------------------------------------------------------------------------------------
# Context assembly


@dataclass
class ContextResult:
    """The logged injection, whether the session was new, and the selected items with their text."""

    injection: ContextInjection
    session_created: bool
    selected: list[dict] = field(default_factory=list)
    considered: int = 0


def assemble_context(
    graph: Graph,
    *,
    session_id: str,
    query: str = "",
    vector=None,
    start_nodes=(),
    anchors=(),
    exclude=(),
    persona=None,
    budget_unit: str = "items",
    budget: int | None = None,
    k: int = 50,
    hops: int | None = None,
    now: datetime | None = None,
    owner=None,
    role: str | None = None,
) -> ContextResult:
    """The retrieval pipeline's candidates (``retrieve``) within a budget, logged as a ContextInjection.

    Candidates in score order fill the budget until the first one that does not fit; the rest are
    cut, with the reason. Every candidate (the best MAX_CANDIDATES_PER_INJECTION and every selected one) is
    frozen in the log with its path and components. The selected nodes are counted as surfaced and
    the edges on their paths as traversed (set-based).

    ``owner`` (the caller, with its ``role`` in the graph's organization) owns a session this call
    creates; adding to an existing session needs ``graphadmin.tenancy.may_act_on_session`` (its
    owner, or an operator), else Forbidden and nothing is written. Without an owner (internal
    callers: tests, the bench) no check is made and a new session has no owner.
    """
    revision, policy = policy_of(graph)
    if budget is None:
        budget = revision.default_budget_items if budget_unit == "items" else revision.default_budget_tokens
    params = {
        "start_nodes": list(start_nodes),
        "anchors": list(anchors),
        "exclude": sorted(set(exclude)),
        "persona": persona or {},
        "k": k,
        "hops": hops,
        "vector": vector is not None,
    }
    qvec = query_vector(query, vector, graph)
    ordered = retrieve(
        graph,
        query=query,
        vector=vector,
        start_nodes=start_nodes,
        anchors=anchors,
        exclude=exclude,
        persona=persona,
        k=k,
        hops=hops,
        now=now,
        policy=(revision, policy),
        qvec=qvec,
    ).items
    costs = [1 if budget_unit == "items" else item.row.tokens for item in ordered]
    selection = scoring.select_within_budget([item.node_id for item in ordered], costs, budget)
    if policy.exploration:
        # Exploration: one slot for the best candidate no similar question has evidence about, only
        # when a near-repeat's context failed (novelty is set only then; scoring.explore_slot).
        selection = scoring.explore_slot(
            selection, [item.scored.candidate.novelty == 1.0 for item in ordered], costs, budget
        )

    # The candidate log keeps the best MAX_CANDIDATES_PER_INJECTION ranks and every selected one (uses are
    # credited through it); how many were considered and how many were stored is kept with the request.
    cap = settings.MAX_CANDIDATES_PER_INJECTION
    logged = [(p, item) for p, item in enumerate(ordered, start=1) if p <= cap or selection.selected[p - 1]]
    params["candidates"], params["candidates_logged"] = len(ordered), len(logged)

    # Every check has passed: write.
    with transaction.atomic():
        session, created = AgentSession.objects.get_or_create(
            graph=graph, external_id=session_id, defaults={"owner": owner}
        )
        if owner is not None and not created:
            # Checked on the row get_or_create found, inside the transaction: a session another user
            # created a moment ago is refused too.
            require_session(role, owner.pk, session.owner_id, session_id)
        injection = ContextInjection.objects.create(
            graph=graph,
            session=session,
            policy_revision=revision,
            query=query,
            mode="retrieve",
            budget_unit=budget_unit,
            budget=budget,
            spent=selection.spent,
            params=params,
            query_embedding=qvec,
            query_model=query_model(vector),
        )
        sql.copy_candidates(
            injection.pk,
            graph.pk,
            [
                (
                    p,
                    selection.selected[p - 1],
                    item.node_id,
                    item.edge_id,
                    _stored_hops(item, policy),
                    item.row.tokens,
                    item.scored.total,
                    {**item.features(), "cut": selection.reasons[p - 1]},
                    item.scored.components_dict(),
                )
                for p, item in logged
            ],
            injection.created_at,
        )
        chosen = [item for item, sel in zip(ordered, selection.selected, strict=True) if sel]
        _bump_counters(graph, chosen)
    texts = {
        n["id"]: n
        for n in Node.objects.filter(graph=graph, pk__in=[i.node_id for i in chosen]).values(
            "id", "key", "title", "kind", "text"
        )
    }
    selected = []
    for p, (item, sel) in enumerate(zip(ordered, selection.selected, strict=True), start=1):
        if not sel:
            continue
        node = texts[item.node_id]
        selected.append(
            {
                "rank": p,
                "node": node["id"],
                "key": node["key"],
                "title": node["title"],
                "kind": node["kind"],
                "text": node["text"],
                "tokens": item.row.tokens,
                "total": item.scored.total,
                "hops": item.scored.candidate.hops,
                "entry": item.entry,
                "path": list(item.path),
                "edge": item.edge_id,
                "edge_type": item.edge_type,
            }
        )
    return ContextResult(injection, created, selected, considered=len(ordered))


def _stored_hops(item, policy: scoring.Policy) -> int:
    hops = item.scored.candidate.hops
    # The column is not nullable: unreachable (hybrid) is stored as max_hops + 1; features keep None.
    return policy.max_hops + 1 if hops is None else hops


def _bump_counters(graph: Graph, chosen: list[Candidate]) -> None:
    """Counters of what was given to the agent, set-based: each selected node is surfaced (and
    traversed when it came along a path), each edge on a selected node's path is surfaced and
    traversed (decay spares it)."""
    sql.bump_counters(
        graph.pk,
        node_ids=sorted({c.node_id for c in chosen}),
        through=sorted({c.node_id for c in chosen if c.path}),
        edge_ids=sorted({e for c in chosen for e in c.path}),
    )


# ---------------------------------------------------------------------------------------------
# Explain


def candidate_dict(
    c: InjectionCandidate, edges: dict | None = None, titles: dict | None = None, taught: dict | None = None
) -> dict:
    """A logged candidate as the explain endpoint shows it: how it entered, its path, every factor, and
    ``learned_from``: the past sessions whose evidence lifted or lowered it (``taught``: answered edge id ->
    its applied changes, ``queries.evidence_sessions``).

    ``edges`` (edge id -> (source id, type, target id)) and ``titles`` (node id -> title) give the path
    in words, ``A -derived_from-> B -depends_on-> C``; without them ``path_text`` is empty.
    """
    f = c.features
    path = f.get("path") or ([c.edge_id] if c.edge_id else [])
    entry = f.get("entry") or ("expansion" if c.edge_id else "vector")
    return {
        "rank": c.rank,
        "selected": c.selected,
        "node": c.node_id,
        "edge": c.edge_id,
        "hops": f.get("hops", c.hops),
        "entry": entry,
        "path": path,
        "path_text": path_text(path, c.node_id, edges or {}, titles or {}),
        "cut": f.get("cut", ""),
        "tokens": c.tokens,
        "total": c.total,
        "features": f,
        "components": c.components,
        "learned_from": learned_from(f.get("evidence") or (), taught or {}),
    }


def learned_from(evidence, taught: dict) -> list[dict]:
    """The past sessions behind a candidate's ``memory``: for each similar question's answered edge
    (``[question, similarity, weight, edge]``), the sessions whose batches (still applied) moved it,
    with the evidence and whether it lifted (weight up) or lowered the candidate."""
    rows = []
    for question, similarity, _weight, edge in evidence:
        for change in taught.get(edge, ()):
            rows.append(
                {
                    "session": change["session"],
                    "batch": change["batch"],
                    "question": question,
                    "question_text": change["question"],
                    "similarity": similarity,
                    "evidence": change["event"],
                    "effect": "lifted" if change["after"] > change["before"] else "lowered",
                }
            )
    return rows


def path_text(path, node_id: int, edges: dict, titles: dict) -> str:
    """A path of edge ids in words: ``A -type-> B -type-> C`` (empty when the node entered without an edge)."""
    if not path or any(e not in edges for e in path):
        return ""
    first_source = edges[path[0]][0]
    parts = [titles.get(first_source, str(first_source))]
    for e in path:
        _source, etype, target = edges[e]
        parts.append(f"-{etype}-> {titles.get(target, str(target))}")
    return " ".join(parts)


def _path_words(graph_id: int, cands) -> tuple[dict, dict]:
    """The edges on the candidates' paths and the titles of their ends, in two queries."""
    ids = {e for c in cands for e in (c.features.get("path") or ([c.edge_id] if c.edge_id else []))}
    if not ids:
        return {}, {}
    edges = {
        e["id"]: (e["source_id"], e["edge_type__name"], e["target_id"])
        for e in Edge.objects.filter(graph_id=graph_id, pk__in=ids).values(
            "id", "source_id", "target_id", "edge_type__name"
        )
    }
    nodes = {n for s, _t, d in edges.values() for n in (s, d)}
    titles = dict(Node.objects.filter(graph_id=graph_id, pk__in=nodes).values_list("id", "title"))
    return edges, titles


def explain(injection: ContextInjection, i: int | None = None, j: int | None = None) -> dict:
    """Every candidate of an injection with how it entered, its path and components; with ranks i and j,
    why i beat j."""
    cands = list(injection.candidates.order_by("rank"))
    edges, titles = _path_words(injection.graph_id, cands)
    taught = sql.evidence_sessions(injection.graph_id, {e[3] for c in cands for e in c.features.get("evidence") or ()})
    result = {
        "injection": injection.pk,
        "session": injection.session.external_id,
        "query": injection.query,
        "mode": injection.mode,
        "policy_revision": injection.policy_revision.revision,
        "budget_unit": injection.budget_unit,
        "budget": injection.budget,
        "spent": injection.spent,
        "created_at": injection.created_at,
        "candidates": [candidate_dict(c, edges, titles, taught) for c in cands],
    }
    result["comparison"] = compare(result["candidates"], i, j)
    return result


def compare(candidates: list[dict], i: int | None, j: int | None) -> dict | None:
    """Why rank i beat rank j, from ``explain``'s candidate dicts; None when neither rank is given."""
    if i is None and j is None:
        return None
    if i is None or j is None:
        raise RankingInputError({"i" if i is None else "j": ["Give both i and j to compare two ranks."]})
    by_rank = {c["rank"]: c for c in candidates}
    for name, value in (("i", i), ("j", j)):
        if value not in by_rank:
            raise RankingInputError({name: [f"No candidate at rank {value} (this injection has {len(candidates)})."]})
    ci, cj = by_rank[i], by_rank[j]
    return {
        "i": i,
        "j": j,
        "total_i": ci["total"],
        "total_j": cj["total"],
        "difference": ci["total"] - cj["total"],
        "components": scoring.explain_pair(ci["components"], cj["components"]),
    }


# ---------------------------------------------------------------------------------------------
# What-if replay


def _replay_order(
    inj: ContextInjection, cands: list[InjectionCandidate], policy: scoring.Policy, priorities: dict
) -> list[str]:
    """Re-rank an injection's frozen candidates under ``policy`` (no new search, no database access)."""
    if inj.mode == "traversal":
        scored = []
        for c in cands:
            f = c.features
            scored.append(
                scoring.score_edge(
                    scoring.EdgeCandidate(
                        edge_id=f["edge_id"],
                        source_id=f["source_id"],
                        target_id=f["target_id"],
                        hops=f["hops"],
                        weight=f["weight"],
                        feedback_weight=f["feedback_weight"],
                        priority=priorities.get(f.get("edge_type"), f["priority"]),
                        similarity=f.get("similarity"),
                        edge_type=f.get("edge_type", ""),
                    ),
                    policy,
                )
            )
        return [s.stable_id for s in scoring.best_first_order(scored, inj.params.get("start_nodes", []))]
    # Retrieval (and older hybrid) logs: every candidate is a node with its frozen features.
    scored = [
        scoring.score_node(
            scoring.NodeCandidate(
                node_id=c.node_id,
                vector=c.features.get("vector") or 0.0,
                hops=c.features.get("hops"),
                age_days=c.features.get("age_days"),
                persona=c.features.get("persona", 0.0),
                feedback_weight=c.features.get("feedback_weight", scoring.NEUTRAL),
                path_weight=c.features.get("path_weight"),
                priority=priorities.get(c.features["edge_type"], c.features.get("priority", 0.0))
                if c.features.get("edge_type")
                else 0.0,
                novelty=c.features.get("novelty"),
                memory=c.features.get("memory"),
            ),
            policy,
        )
        for c in cands
    ]
    return [s.stable_id for s in scoring.rank(scored)]


def whatif(
    graph: Graph, *, changes: dict | None = None, priorities: dict | None = None, n: int = 20, k: int = 5
) -> dict:
    """Replay the last ``n`` injections' frozen candidates under the current policy and a draft.

    The draft is the current policy with ``changes`` (policy numbers) and ``priorities``
    (edge type name -> priority) applied. Reports per injection and in aggregate: rank changes,
    top-1 flips, Kendall tau, and where the used items (explicit or implicit UseEvents of the
    session, for this injection or unattributed) would rank (MRR, hit@k). Writes nothing.
    """
    changes, priorities = dict(changes or {}), dict(priorities or {})
    revision, policy = policy_of(graph)
    current_priorities = dict(EdgeType.objects.filter(graph=graph).values_list("name", "priority"))
    unknown = sorted(set(priorities) - set(current_priorities))
    if unknown:
        raise RankingInputError({"edge_type_priorities": [f"Unknown edge type(s) in this graph: {unknown}"]})
    draft = policy.with_changes(changes)
    draft_priorities = {**current_priorities, **priorities}
    injections = list(
        ContextInjection.objects.filter(graph=graph).select_related("session").order_by("-created_at", "-id")[:n]
    )
    cands_by_inj: dict[int, list[InjectionCandidate]] = {}
    for c in InjectionCandidate.objects.filter(graph=graph, injection__in=[i.pk for i in injections]).order_by(
        "injection_id", "rank"
    ):
        cands_by_inj.setdefault(c.injection_id, []).append(c)
    uses = list(
        UseEvent.objects.filter(
            graph=graph, session_id__in={i.session_id for i in injections}, signal__in=USED_SIGNALS
        ).values_list("session_id", "injection_id", "node_id", "edge_id")
    )

    uses_by_session: dict[int, list[tuple]] = {}
    for session_id, injection_id, node_id, edge_id in uses:
        uses_by_session.setdefault(session_id, []).append((injection_id, node_id, edge_id))

    per_injection, results = [], []
    for inj in injections:
        cands = cands_by_inj.get(inj.pk, [])
        mine = [u for u in uses_by_session.get(inj.session_id, ()) if u[0] in (None, inj.pk)]
        used_nodes = {u[1] for u in mine if u[1]}
        used_edges = {u[2] for u in mine if u[2]}
        prefix = "edge:" if inj.mode == "traversal" else "node:"
        used = [
            f"{prefix}{c.edge_id if inj.mode == 'traversal' else c.node_id}"
            for c in cands
            if c.node_id in used_nodes or (c.edge_id and c.edge_id in used_edges)
        ]
        current_order = _replay_order(inj, cands, policy, current_priorities)
        draft_order = _replay_order(inj, cands, draft, draft_priorities)
        result = scoring.compare_orders(current_order, draft_order, used, k)
        results.append(result)
        per_injection.append(
            {
                "injection": inj.pk,
                "session": inj.session.external_id,
                "created_at": inj.created_at,
                "mode": inj.mode,
                "candidates": len(cands),
                "top1_current": current_order[0] if current_order else None,
                "top1_draft": draft_order[0] if draft_order else None,
                "top1_flip": result.top1_flip,
                "kendall_tau": result.kendall_tau,
                "moved": len(result.changes),
                "changes": result.changes[:20],
                "used": result.used,
                "mrr_current": result.mrr_current,
                "mrr_draft": result.mrr_draft,
                "hit_current": result.hit_current,
                "hit_draft": result.hit_draft,
            }
        )
    return {
        "policy_revision": revision.revision,
        "draft": {"changes": changes, "edge_type_priorities": priorities},
        "hit_k": k,
        "aggregate": scoring.aggregate(results),
        "injections": per_injection,
    }
