"""Context, the pipeline's last stages: the budget and the log.

``assemble_context`` takes the retrieval's candidates (ranking.retrieval) in score order, fills the
budget, and freezes the whole candidate set as a ContextInjection (which explanations and what-if
replays read); the only stage that writes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db import transaction

from feedback.models import AgentSession, ContextInjection
from graphadmin.agents.client import RetrievalRequest
from graphadmin.models import Graph, Node
from graphadmin.tenancy import require_session

from . import queries as sql
from . import scoring
from .retrieval import Candidate, RankingInputError, as_request, policy_of, query_model, query_vector, retrieve


@dataclass
class ContextResult:
    """The logged injection, whether the session was new, and the selected items with their text."""

    injection: ContextInjection
    session_created: bool
    selected: list[dict] = field(default_factory=list)
    considered: int = 0


def assemble_context(
    graph: Graph,
    request: RetrievalRequest | None = None,
    *,
    now: datetime | None = None,
    owner=None,
    role: str | None = None,
    session_id: str | None = None,
    **fields,
) -> ContextResult:
    """The retrieval pipeline's candidates (``retrieve``) within a budget, logged as a ContextInjection.

    ``request`` (or its fields as keywords; ``session_id`` is the request's ``session``) says what is
    asked. Candidates in score order fill the budget until the first one that does not fit; the rest are
    cut, with the reason. Every candidate (the best MAX_CANDIDATES_PER_INJECTION and every selected one) is
    frozen in the log with its path and components. The selected nodes are counted as surfaced and
    the edges on their paths as traversed (set-based).

    ``owner`` (the caller, with its ``role`` in the graph's organization) owns a session this call
    creates; adding to an existing session needs ``graphadmin.tenancy.may_act_on_session`` (its
    owner, or an operator), else Forbidden and nothing is written. Without an owner (internal
    callers: tests, the bench) no check is made and a new session has no owner.
    """
    if session_id is not None:
        fields["session"] = session_id
    req = as_request(request, fields)
    session_id, query, vector, budget_unit, budget = req.session, req.query, req.vector, req.budget_unit, req.budget
    if not session_id:
        raise RankingInputError({"session": ["This field is required."]})
    revision, policy = policy_of(graph)
    if budget is None:
        budget = revision.default_budget_items if budget_unit == "items" else revision.default_budget_tokens
    params = {
        "start_nodes": list(req.start_nodes),
        "anchors": list(req.anchors),
        "exclude": sorted(set(req.exclude)),
        "persona": req.persona,
        "k": req.k,
        "hops": req.hops,
        "vector": vector is not None,
    }
    qvec = query_vector(query, vector, graph)
    ordered = retrieve(graph, req, now=now, policy=(revision, policy), qvec=qvec).items
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
