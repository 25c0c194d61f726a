"""What-if: the last injections' frozen candidates replayed under a draft policy beside the current one.

No new search and no write: the candidate log (ranking.context) holds every score input.
"""

from __future__ import annotations

from feedback.models import ContextInjection, InjectionCandidate, UseEvent
from graphadmin.models import EdgeType, Graph

from . import scoring
from .retrieval import RankingInputError, policy_of

MAX_WHATIF_INJECTIONS = 200
MAX_WHATIF_PRIORITIES = 200  # draft edge-type priorities per what-if
USED_SIGNALS = ("explicit", "implicit")


def _replay_order(cands: list[InjectionCandidate], policy: scoring.Policy, priorities: dict) -> list[str]:
    """Re-rank an injection's frozen candidates under ``policy`` (no new search, no database access).

    Every logged candidate is a node with its frozen features (ranking.retrieval.Candidate.features).
    """
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
                lexical=c.features.get("lexical") or 0.0,
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
        used = [
            f"node:{c.node_id}" for c in cands if c.node_id in used_nodes or (c.edge_id and c.edge_id in used_edges)
        ]
        current_order = _replay_order(cands, policy, current_priorities)
        draft_order = _replay_order(cands, draft, draft_priorities)
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
