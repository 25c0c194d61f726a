"""The ranking service: fetch candidates (ranking.candidates), score them (ranking.scoring), log injections.

The REST API, the dashboard and the MCP tool all call these functions. Bad input raises
``RankingInputError`` with a dict of field -> messages, which the API turns into a 400; nothing
is written before every check has passed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone

from django.db import connection, transaction

from feedback.models import AgentSession, ContextInjection, InjectionCandidate, UseEvent
from graphadmin.embeddings import check_comparable, configured_model, embed_query
from graphadmin.models import EdgeType, Graph, Node, PolicyRevision

from . import candidates as sql
from . import scoring

# Documented maxima (docs/ranking.md): bounded work per request.
MAX_START_NODES = 50
MAX_RANK_K = 500
MAX_SEARCH_K = 200
MAX_HOPS = 3
MAX_BUDGET_ITEMS = 200
MAX_BUDGET_TOKENS = 100_000
MAX_WHATIF_INJECTIONS = 200
MAX_QUERY_CHARS = 4000
USED_SIGNALS = ("explicit", "implicit")


class RankingInputError(Exception):
    """Invalid input found after parsing (unknown nodes, hops above the policy's bound, ...)."""

    def __init__(self, errors: dict):
        super().__init__(errors)
        self.errors = errors


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
            "edge_id": r.edge_id, "source_id": r.source_id, "target_id": r.target_id, "hops": r.hops,
            "weight": r.weight, "feedback_weight": r.feedback_weight, "edge_type": r.edge_type,
            "priority": r.priority, "similarity": r.similarity, "tokens": r.tokens,
        }


@dataclass
class RankResult:
    """The ranked edges (top k), the policy revision used and how many candidates were considered."""

    policy_revision: PolicyRevision
    items: list[RankedEdge]
    considered: int


def _edge_candidate(r: sql.EdgeRow) -> scoring.EdgeCandidate:
    return scoring.EdgeCandidate(
        edge_id=r.edge_id, source_id=r.source_id, target_id=r.target_id, hops=r.hops, weight=r.weight,
        feedback_weight=r.feedback_weight, priority=r.priority, similarity=r.similarity, edge_type=r.edge_type,
    )


def _fetch_edges(graph: Graph, revision: PolicyRevision, policy: scoring.Policy, start_nodes, qvec, hops: int | None):
    hops = _check_hops(hops, policy)
    check_nodes(graph, start_nodes, "start_nodes")
    rows = sql.edge_candidates(graph.pk, start_nodes, qvec, hops, revision.fanout_cap)
    return rows


def rank(graph: Graph, start_nodes, *, query: str = "", vector=None, k: int = 50, hops: int | None = None) -> RankResult:
    """Every candidate edge within ``hops`` of the start nodes, scored and ranked; the top k returned."""
    qvec = query_vector(query, vector, graph)
    revision, policy = policy_of(graph)
    rows = _fetch_edges(graph, revision, policy, start_nodes, qvec, hops)
    by_id = {r.edge_id: r for r in rows}
    ranked = scoring.rank_edges((_edge_candidate(r) for r in rows), policy)
    items = [RankedEdge(s, by_id[s.candidate.edge_id], rank=p) for p, s in enumerate(ranked[:k], start=1)]
    return RankResult(revision, items, considered=len(rows))


# ---------------------------------------------------------------------------------------------
# Search (hybrid)


@dataclass
class SearchHit:
    """A scored vector-search hit with its node row."""

    scored: scoring.Scored
    row: sql.NodeRow
    rank: int = 0

    @property
    def node_id(self) -> int:
        return self.row.node_id

    def features(self) -> dict:
        c = self.scored.candidate
        return {
            "node_id": c.node_id, "vector": c.vector, "hops": c.hops, "age_days": c.age_days,
            "persona": c.persona, "tokens": self.row.tokens,
        }


@dataclass
class SearchResult:
    """Hybrid hits in rank order and the policy revision used."""

    policy_revision: PolicyRevision
    items: list[SearchHit]


def search(
    graph: Graph, *, query: str = "", vector=None, k: int = 20, anchors=(), persona=None, now: datetime | None = None,
    policy: tuple[PolicyRevision, scoring.Policy] | None = None,
) -> SearchResult:
    """Hybrid search: HNSW top-k by the query vector, then hop (proximity), persona and recency factors."""
    qvec = query_vector(query, vector, graph)
    if qvec is None:
        raise RankingInputError({"query": ["Give a query with searchable words, or a vector."]})
    revision, policy = policy or policy_of(graph)
    anchors = list(anchors or ())
    if anchors:
        check_nodes(graph, anchors, "anchors")
    rows = sql.vector_candidates(graph.pk, qvec, k)
    distances = sql.anchor_distances(graph.pk, anchors, [r.node_id for r in rows], policy.max_hops) if anchors else {}
    now = now or datetime.now(timezone.utc)
    by_id = {r.node_id: r for r in rows}
    candidates = [
        scoring.NodeCandidate(
            node_id=r.node_id, vector=r.vector, hops=distances.get(r.node_id),
            age_days=(now - r.touched_at).total_seconds() / 86400.0 if r.touched_at else None,
            persona=scoring.persona_affinity(r.kind, r.tags, persona or {}),
        )
        for r in rows
    ]
    items = [SearchHit(s, by_id[s.candidate.node_id], rank=p) for p, s in enumerate(scoring.rank_nodes(candidates, policy), start=1)]
    return SearchResult(revision, items)


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
    persona=None,
    budget_unit: str = "items",
    budget: int | None = None,
    k: int = 50,
    hops: int | None = None,
    now: datetime | None = None,
) -> ContextResult:
    """Best-first retrieval within a budget, logged as a ContextInjection with every candidate considered.

    With start nodes: traversal mode (best-first over the candidate edges by traversal score).
    Without: hybrid mode (the hybrid search's top k, in rank order). Items are selected in that
    order until the first one that does not fit the budget; the rest are cut. Counters of the
    selected nodes and edges are bumped set-based (INSERT ... ON CONFLICT DO UPDATE).
    """
    revision, policy = policy_of(graph)
    if budget is None:
        budget = revision.default_budget_items if budget_unit == "items" else revision.default_budget_tokens
    params = {"start_nodes": list(start_nodes), "anchors": list(anchors), "persona": persona or {}, "k": k, "hops": hops,
              "vector": vector is not None}
    if start_nodes:
        mode = "traversal"
        rows = _fetch_edges(graph, revision, policy, start_nodes, query_vector(query, vector, graph), hops)
        by_id = {r.edge_id: r for r in rows}
        scored = [scoring.score_edge(_edge_candidate(r), policy) for r in rows]
        ordered = [RankedEdge(s, by_id[s.candidate.edge_id]) for s in scoring.best_first_order(scored, start_nodes)]
    else:
        mode = "hybrid"
        ordered = search(
            graph, query=query, vector=vector, k=k, anchors=anchors, persona=persona, now=now, policy=(revision, policy)
        ).items
    costs = [1 if budget_unit == "items" else item.row.tokens for item in ordered]
    selection = scoring.select_within_budget([item.node_id for item in ordered], costs, budget)

    # Every check has passed: write.
    with transaction.atomic():
        session, created = AgentSession.objects.get_or_create(graph=graph, external_id=session_id)
        injection = ContextInjection.objects.create(
            graph=graph, session=session, policy_revision=revision, query=query, mode=mode, budget_unit=budget_unit,
            budget=budget, spent=selection.spent, params=params,
        )
        _copy_candidates(injection, [
            (p, selection.selected[p - 1], item.node_id, item.row.edge_id if mode == "traversal" else None,
             _stored_hops(item, policy), item.row.tokens, item.scored.total,
             {**item.features(), "cut": selection.reasons[p - 1]}, item.scored.components_dict())
            for p, item in enumerate(ordered, start=1)
        ])
        chosen = [item for item, sel in zip(ordered, selection.selected) if sel]
        _bump_counters(graph, mode, [i.node_id for i in chosen], [i.row.edge_id for i in chosen] if mode == "traversal" else [])
    texts = {n["id"]: n for n in Node.objects.filter(graph=graph, pk__in=[i.node_id for i in chosen]).values("id", "key", "title", "kind", "text")}
    selected = []
    for p, (item, sel) in enumerate(zip(ordered, selection.selected), start=1):
        if not sel:
            continue
        node = texts[item.node_id]
        selected.append({
            "rank": p, "node": node["id"], "key": node["key"], "title": node["title"], "kind": node["kind"], "text": node["text"],
            "tokens": item.row.tokens, "total": item.scored.total, "hops": item.scored.candidate.hops,
            "edge": item.row.edge_id if mode == "traversal" else None,
            "edge_type": item.row.edge_type if mode == "traversal" else None,
        })
    return ContextResult(injection, created, selected, considered=len(ordered))


_CANDIDATE_COLUMNS = ("injection_id", "graph_id", "rank", "selected", "node_id", "edge_id", "hops", "tokens", "total", "features", "components")


def _copy_candidates(injection: ContextInjection, rows: list[tuple]) -> None:
    """Write every candidate of an injection with one COPY (ten times faster than a bulk INSERT of JSON rows)."""
    columns = ", ".join(_CANDIDATE_COLUMNS)
    with connection.cursor() as cur:
        with cur.cursor.copy(f"COPY {InjectionCandidate._meta.db_table} ({columns}) FROM STDIN") as copy:
            for rank, selected, node_id, edge_id, hops, tokens, total, features, components in rows:
                copy.write_row((
                    injection.pk, injection.graph_id, rank, selected, node_id, edge_id, hops, tokens, total,
                    json.dumps(features), json.dumps(components),
                ))


def _stored_hops(item, policy: scoring.Policy) -> int:
    hops = item.scored.candidate.hops
    # The column is not nullable: unreachable (hybrid) is stored as max_hops + 1; features keep None.
    return policy.max_hops + 1 if hops is None else hops


def _bump_counters(graph: Graph, mode: str, node_ids: list[int], edge_ids: list[int]) -> None:
    """Surfaced (and, for traversal, traversed) counters of the selected nodes and edges, set-based."""
    traversed = 1 if mode == "traversal" else 0
    with connection.cursor() as cur:
        if node_ids:
            cur.execute(
                """
                INSERT INTO graphadmin_nodestats (node_id, graph_id, surfaced_count, traversed_count, used_count, last_surfaced_at)
                SELECT n, %(graph)s, 1, %(t)s, 0, now() FROM unnest(%(ids)s::bigint[]) AS n
                ON CONFLICT (node_id) DO UPDATE SET
                    surfaced_count = graphadmin_nodestats.surfaced_count + 1,
                    traversed_count = graphadmin_nodestats.traversed_count + EXCLUDED.traversed_count,
                    last_surfaced_at = EXCLUDED.last_surfaced_at
                """,
                {"graph": graph.pk, "ids": sorted(set(node_ids)), "t": traversed},
            )
        if edge_ids:
            cur.execute(
                """
                INSERT INTO graphadmin_edgestats (edge_id, graph_id, surfaced_count, traversed_count, used_count, last_traversed_at)
                SELECT e, %(graph)s, 1, 1, 0, now() FROM unnest(%(ids)s::bigint[]) AS e
                ON CONFLICT (edge_id) DO UPDATE SET
                    surfaced_count = graphadmin_edgestats.surfaced_count + 1,
                    traversed_count = graphadmin_edgestats.traversed_count + 1,
                    last_traversed_at = EXCLUDED.last_traversed_at
                """,
                {"graph": graph.pk, "ids": sorted(set(edge_ids))},
            )


# ---------------------------------------------------------------------------------------------
# Explain


def candidate_dict(c: InjectionCandidate) -> dict:
    """A logged candidate as the explain endpoint shows it."""
    return {
        "rank": c.rank, "selected": c.selected, "node": c.node_id, "edge": c.edge_id, "hops": c.features.get("hops", c.hops),
        "tokens": c.tokens, "total": c.total, "features": c.features, "components": c.components,
    }


def explain(injection: ContextInjection, i: int | None = None, j: int | None = None) -> dict:
    """Every candidate of an injection with its components; with ranks i and j, why i beat j."""
    cands = list(injection.candidates.order_by("rank"))
    result = {
        "injection": injection.pk, "session": injection.session.external_id, "query": injection.query, "mode": injection.mode,
        "policy_revision": injection.policy_revision.revision, "budget_unit": injection.budget_unit,
        "budget": injection.budget, "spent": injection.spent, "created_at": injection.created_at,
        "candidates": [candidate_dict(c) for c in cands],
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
        "i": i, "j": j, "total_i": ci["total"], "total_j": cj["total"], "difference": ci["total"] - cj["total"],
        "components": scoring.explain_pair(ci["components"], cj["components"]),
    }


# ---------------------------------------------------------------------------------------------
# What-if replay


def _replay_order(inj: ContextInjection, cands: list[InjectionCandidate], policy: scoring.Policy, priorities: dict) -> list[str]:
    """Re-rank an injection's frozen candidates under ``policy`` (no new search, no database access)."""
    if inj.mode == "traversal":
        scored = []
        for c in cands:
            f = c.features
            scored.append(scoring.score_edge(scoring.EdgeCandidate(
                edge_id=f["edge_id"], source_id=f["source_id"], target_id=f["target_id"], hops=f["hops"],
                weight=f["weight"], feedback_weight=f["feedback_weight"],
                priority=priorities.get(f.get("edge_type"), f["priority"]), similarity=f.get("similarity"),
                edge_type=f.get("edge_type", ""),
            ), policy))
        return [s.stable_id for s in scoring.best_first_order(scored, inj.params.get("start_nodes", []))]
    scored = [
        scoring.score_node(scoring.NodeCandidate(
            node_id=c.features["node_id"], vector=c.features["vector"], hops=c.features.get("hops"),
            age_days=c.features.get("age_days"), persona=c.features.get("persona", 0.0),
        ), policy)
        for c in cands
    ]
    return [s.stable_id for s in scoring.rank(scored)]


def whatif(graph: Graph, *, changes: dict | None = None, priorities: dict | None = None, n: int = 20, k: int = 5) -> dict:
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
    for c in InjectionCandidate.objects.filter(graph=graph, injection__in=[i.pk for i in injections]).order_by("injection_id", "rank"):
        cands_by_inj.setdefault(c.injection_id, []).append(c)
    uses = list(UseEvent.objects.filter(
        graph=graph, session_id__in={i.session_id for i in injections}, signal__in=USED_SIGNALS
    ).values_list("session_id", "injection_id", "node_id", "edge_id"))

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
            for c in cands if c.node_id in used_nodes or (c.edge_id and c.edge_id in used_edges)
        ]
        current_order = _replay_order(inj, cands, policy, current_priorities)
        draft_order = _replay_order(inj, cands, draft, draft_priorities)
        result = scoring.compare_orders(current_order, draft_order, used, k)
        results.append(result)
        per_injection.append({
            "injection": inj.pk, "session": inj.session.external_id, "created_at": inj.created_at, "mode": inj.mode,
            "candidates": len(cands), "top1_current": current_order[0] if current_order else None,
            "top1_draft": draft_order[0] if draft_order else None, "top1_flip": result.top1_flip,
            "kendall_tau": result.kendall_tau, "moved": len(result.changes), "changes": result.changes[:20],
            "used": result.used, "mrr_current": result.mrr_current, "mrr_draft": result.mrr_draft,
            "hit_current": result.hit_current, "hit_draft": result.hit_draft,
        })
    return {
        "policy_revision": revision.revision,
        "draft": {"changes": changes, "edge_type_priorities": priorities},
        "hit_k": k,
        "aggregate": scoring.aggregate(results),
        "injections": per_injection,
    }
