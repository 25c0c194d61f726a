"""ranking's MCP tool bodies (registered by graphadmin.agents.mcp_server): graph_search, graph_context, graph_explain.

Each is the REST endpoint's code path with the MCP's errors: the same serializers validate the
input and build the one request, the same stages answer, the same payloads (ranking.payloads) come back.
"""

from __future__ import annotations

from feedback.models import ContextInjection, UpdateBatch
from graphadmin import readiness
from graphadmin.agents.mcp_tools import graph_for, invalid, validated
from graphadmin.errors import NotFound
from graphadmin.tenancy import NEEDS, graph_access
from ranking import serializers as rs
from ranking.context import assemble_context
from ranking.explain import compare
from ranking.explain import explain as explain_injection
from ranking.payloads import context_payload, search_payload
from ranking.retrieval import prepare
from ranking.retrieval import search as search_graph


def search(user, graph_id: int, args: dict) -> dict:
    """graph_search: POST /api/graphs/{id}/search/ (agents, reviewers and up); logs nothing."""
    graph = graph_for(user, graph_id, "retrieve")
    result = search_graph(prepare(graph, validated(rs.SearchRequestSerializer, args, request=True)))
    return _noticed(search_payload(result, readiness.vectors_pending(graph.pk)))


def context(user, graph_id: int, args: dict) -> dict:
    """graph_context: POST /api/graphs/{id}/context/ (agents, operators and up); logs the injection in
    the caller's own session (another user's session is refused unless the caller is an operator). An
    answer that abstained also carries a ``note`` saying so in words."""
    access = graph_access(user, graph_id, "context")
    graph = access.graph
    req = validated(rs.ContextRequestSerializer, args, request=True)
    result = assemble_context(prepare(graph, req), owner=user, role=access.role)
    payload = context_payload(result, req.session)
    if result.abstained:
        payload["note"] = abstained_text(result.confidence, result.injection.params.get("abstain_floor", 0.0))
    return _noticed(payload)


def _noticed(payload: dict) -> dict:
    """The answer, with a ``notice`` first in plain words while the graph's vectors are still being written:
    an agent reads the tool's text, and a count alone is easy to pass over."""
    notice = readiness.pending_notice(payload["vectors_pending"])
    return {"notice": notice, **payload} if notice else payload


def abstained_text(confidence: float, floor: float) -> str:
    """What the tool says when the answer abstained (the agent reads the text, not only the keys)."""
    return (
        f"Abstained: nothing in this graph is relevant to the question (confidence {confidence:.3f} is below "
        f"the graph's floor {floor:.3f}), so no items are given. Answer without the graph's context or ask "
        "differently; the injection is logged, so still report the session's outcome with graph_improve."
    )


def explain(user, injection_id: int, i, j, node) -> dict:
    """graph_explain: GET /api/injections/{id}/explain/, plus the update batches of the injection's session."""
    injection = (
        ContextInjection.objects.for_user(user, NEEDS["read"], or_own="session__owner")
        .select_related("session", "policy_revision")
        .filter(pk=injection_id)
        .first()
    )
    if injection is None:
        raise NotFound(f"Injection {injection_id} not found.")
    params = validated(rs.ExplainQuerySerializer, {"i": i, "j": j})
    i, j = params.get("i"), params.get("j")
    if node is not None and (i is not None or j is not None):
        raise invalid({"node": ["Give either node, or the ranks i and j, not both."]})
    result = explain_injection(injection)
    candidates = result["candidates"]
    if node is not None:
        rank = min((c["rank"] for c in candidates if c["node"] == node), default=None)
        if rank is None:
            raise invalid({"node": [f"Node {node} is not a candidate of injection {injection.pk}."]})
        # Compare with the candidate just above it; the top candidate with the runner-up.
        i, j = (rank, rank - 1) if rank > 1 else ((1, 2) if len(candidates) > 1 else (None, None))
    result["comparison"] = compare(candidates, i, j)
    result["feedback_batches"] = [
        {
            "id": b.pk,
            "kind": b.kind,
            "status": b.status,
            "node_updates": b.node_updates,
            "edge_updates": b.edge_updates,
            "conflicts": b.conflicts,
            "details": b.details,
            "finished_at": b.finished_at,
        }
        for b in UpdateBatch.objects.filter(
            graph_id=injection.graph_id, trigger_session_id=injection.session_id
        ).order_by("id")
    ]
    return result
