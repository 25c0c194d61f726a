"""Context, the pipeline's last stages: the budget and the log.

``assemble_context`` takes the retrieval's candidates (ranking.retrieval) in score order, gates the whole
answer on the graph's floor (ranking.abstention: an answer with nothing relevant abstains and gives no
item), fills the budget, and freezes the whole candidate set as a ContextInjection (which explanations
and what-if replays read); the only stage that writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from django.conf import settings
from django.db import transaction

from feedback.models import ContextInjection
from graphadmin import readiness
from graphadmin.models import Graph
from graphadmin.tenancy import require_session

from . import abstention, scoring
from . import queries as sql
from .retrieval import Candidate, Prepared, RankingInputError, query_model, retrieve


@dataclass
class ContextResult:
    """The logged injection, whether the session was new, and the selected items with their text; the answer's
    ``confidence`` and whether it ``abstained`` (ranking.abstention)."""

    injection: ContextInjection
    session_created: bool
    selected: list[dict] = field(default_factory=list)
    considered: int = 0
    vectors_pending: int = 0  # the graph's vectors still to write when it answered (graphadmin.readiness)
    confidence: float = 0.0
    abstained: bool = False


def assemble_context(prepared: Prepared, *, owner=None, role: str | None = None) -> ContextResult:
    """The retrieval pipeline's candidates (``retrieve``) within a budget, logged as a ContextInjection.

    ``prepared`` (ranking.retrieval.prepare: the request, its policy and query vector) says what is
    asked; its request names the ``session``. Candidates in score order fill the budget until the first
    one that does not fit; the rest are cut, with the reason. Every candidate (the best
    MAX_CANDIDATES_PER_INJECTION and every selected one) is frozen in the log with its path and
    components. The selected nodes are counted as surfaced and the edges on their paths as traversed
    (set-based).

    The whole answer is gated first: its confidence (the best entry point's similarity and lexical match,
    ``ranking.abstention.confidence``) below the policy's ``abstain_floor`` makes it abstain: no item is
    selected (every candidate is cut as ``abstained``), nothing is counted as surfaced, and the injection is
    still logged with every candidate and the confidence, so that it can be learned from and calibrated on.

    ``owner`` (the caller, with its ``role`` in the graph's organization) owns a session this call
    creates; adding to an existing session needs ``graphadmin.tenancy.may_act_on_session`` (its
    owner, or an operator), else Forbidden and nothing is written. Without an owner (internal
    callers: tests, the bench) no check is made and a new session has no owner.
    """
    graph, req, revision, policy, qvec = (
        prepared.graph,
        prepared.request,
        prepared.revision,
        prepared.policy,
        prepared.qvec,
    )
    if not req.session:
        raise RankingInputError({"session": ["This field is required."]})
    budget = req.budget
    if budget is None:
        budget = revision.default_budget_items if req.budget_unit == "items" else revision.default_budget_tokens
    ordered = retrieve(prepared).items
    confidence = abstention.confidence((item.entry, item.row.vector, item.bm25) for item in ordered)
    abstained = abstention.abstains(confidence, revision.abstain_floor, directed=bool(req.start_nodes or req.anchors))
    if abstained:
        selection = scoring.Selection([False] * len(ordered), ["abstained"] * len(ordered), 0)
    else:
        selection = _select(ordered, req.budget_unit, budget, policy)
    gate = {"confidence": confidence, "abstained": abstained, "abstain_floor": revision.abstain_floor}
    # Whether the graph is ready: probes of partial indexes, empty when it is (graphadmin.readiness).
    ready = readiness.readiness(graph.pk)
    # Every check has passed: write. No savepoint of its own: an error rolls back the caller's transaction.
    with transaction.atomic(savepoint=False):
        injection, created, chosen = _log_injection(
            graph, req, owner, role, revision, policy, budget, qvec, ordered, selection, gate, ready
        )
    selected = _selected_items(graph, ordered, selection, chosen)
    return ContextResult(
        injection,
        created,
        selected,
        considered=len(ordered),
        vectors_pending=ready.pending,
        confidence=confidence,
        abstained=abstained,
    )


def _select(ordered: list[Candidate], budget_unit: str, budget: int, policy: scoring.Policy):
    """The candidates (in score order) that fit the budget, with an exploration slot when the policy has one."""
    costs = [1 if budget_unit == "items" else item.row.tokens for item in ordered]
    selection = scoring.select_within_budget([item.node_id for item in ordered], costs, budget)
    if policy.exploration:
        # Exploration: one slot for the best candidate no similar question has evidence about, only
        # when a near-repeat's context failed (novelty is set only then; scoring.explore_slot).
        selection = scoring.explore_slot(
            selection, [item.scored.candidate.novelty == 1.0 for item in ordered], costs, budget
        )
    return selection


def _log_injection(graph, req, owner, role, revision, policy, budget, qvec, ordered, selection, gate, ready=None):
    """Write the session (if new), the ContextInjection, its candidate log and the counters of the selected
    nodes and edges; return (injection, session created, the selected candidates). In the caller's transaction.
    ``gate`` (confidence, abstained, the floor compared with) is kept with the request's parameters: what
    calibration (ranking.calibration) and what-if read.

    ``ready``: the graph's ``graphadmin.readiness.Readiness``. A question (``qvec``) answered while an
    embeddings task is writing the graph's vectors marks the session: its reports teach nothing
    (feedback.reports.not_ready). An answer from start nodes alone does not depend on vectors, and rows no
    task will write (created without a vector) are no build to wait for: neither marks it.
    """
    ready = ready or readiness.Readiness()
    params = {
        "start_nodes": list(req.start_nodes),
        "anchors": list(req.anchors),
        "exclude": sorted(set(req.exclude)),
        "persona": req.persona,
        "k": req.k,
        "hops": req.hops,
        "vector": req.vector is not None,
        **gate,
    }
    # The candidate log keeps the best MAX_CANDIDATES_PER_INJECTION ranks and every selected one (uses are
    # credited through it); how many were considered and how many were stored is kept with the request.
    cap = settings.MAX_CANDIDATES_PER_INJECTION
    logged = [(p, item) for p, item in enumerate(ordered, start=1) if p <= cap or selection.selected[p - 1]]
    params["candidates"], params["candidates_logged"] = len(ordered), len(logged)
    if ready.pending:
        params["vectors_pending"] = ready.pending
    session_id, session_owner, created = sql.agent_session(graph.pk, req.session, owner.pk if owner else None)
    if owner is not None and not created:
        # Checked on the row found, inside the transaction: a session another user created a moment ago
        # is refused too.
        require_session(role, owner.pk, session_owner, req.session)
    if ready.building and qvec is not None:
        sql.mark_session_unready(graph.pk, session_id, ready.pending)
    injection = ContextInjection.objects.create(
        graph=graph,
        session_id=session_id,
        policy_revision=revision,
        query=req.query,
        mode="retrieve",
        budget_unit=req.budget_unit,
        budget=budget,
        spent=selection.spent,
        params=params,
        query_embedding=qvec,
        query_model=query_model(req.vector),
    )
    sql.copy_candidates(injection.pk, graph.pk, _candidate_rows(logged, selection, policy), injection.created_at)
    chosen = [item for item, sel in zip(ordered, selection.selected, strict=True) if sel]
    _bump_counters(graph, chosen)
    return injection, created, chosen


# Rows in COPY column order, NamedTuples (tuples underneath): docs/decisions/0007-positional-hot-tuples.md and
# docs/decisions/0004-candidate-log-copy-msgspec.md
class CandidateRow(NamedTuple):
    """One row of the candidate log, in ranking.queries.CANDIDATE_COLUMNS order (copy_candidates writes it)."""

    rank: int
    selected: bool
    node_id: int
    edge_id: int | None
    hops: int  # max_hops + 1 for a candidate no hop count reaches (_stored_hops)
    tokens: int
    total: float
    features: dict  # the cut reason last
    components: dict


def _candidate_rows(logged: list[tuple[int, Candidate]], selection, policy: scoring.Policy) -> list[CandidateRow]:
    """The candidate log's rows (ranking.queries.copy_candidates): (rank, selected, node, edge, hops, tokens,
    total, features with the cut reason last, components) of each logged (rank, candidate)."""
    rows = []
    selected, reasons = selection.selected, selection.reasons
    for p, item in logged:
        scored = item.scored
        features = item.features()
        features["similarity"] = item.row.vector  # the raw cosine (``vector`` is the fused, per-query one)
        features["cut"] = reasons[p - 1]
        rows.append(
            CandidateRow(
                p,
                selected[p - 1],
                item.node_id,
                item.edge_id,
                _stored_hops(item, policy),
                item.row.tokens,
                scored.total,
                features,
                scored.components_dict(),
            )
        )
    return rows


def _selected_items(graph: Graph, ordered: list[Candidate], selection, chosen: list[Candidate]) -> list[dict]:
    """The selected candidates with their notes' text, as the response lists them."""
    texts = sql.node_texts(graph.pk, [i.node_id for i in chosen])
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
                "vector_score": item.row.vector,
                "hops": item.scored.candidate.hops,
                "entry": item.entry,
                "path": list(item.path),
                "edge": item.edge_id,
                "edge_type": item.edge_type,
            }
        )
    return selected


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
