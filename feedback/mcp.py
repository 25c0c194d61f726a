"""feedback's MCP tool bodies: graph_record_use and graph_improve (registered by graphadmin.mcp_server).

Report intake, as through the REST API: the API's serializers validate, feedback.reports
queues the work for the Celery worker (act ``report``: an agent on its own sessions, operators and
admins on any; the session checks are feedback.reports').
"""

from __future__ import annotations

from typing import Any

from graphadmin.mcp_tools import graph_for, invalid, validated

from . import reports
from .serializers import OutcomeSerializer, ResponseTextSerializer, UsesSerializer


def record_use(user, graph_id: int, session: str, items, response, learning_rate, idempotency_key: str) -> dict:
    """graph_record_use: POST .../sessions/{sid}/uses/ and/or .../response/."""
    graph = graph_for(user, graph_id, "report")
    if not items and response is None:
        raise invalid({"items": ["Give the items used (or flagged wrong), the response text, or both."]})
    out: dict[str, Any] = {"session": session}
    # Both validated before anything is reported: a bad response text does not leave the uses queued.
    uses = validated(UsesSerializer, {"items": items, "learning_rate": learning_rate}) if items else None
    text = validated(ResponseTextSerializer, {"response": response}) if response is not None else None
    if uses is not None:
        out["uses"] = reports.report_uses(user, graph, session, uses, idempotency_key)
    if text is not None:
        out["response"] = reports.report_response(user, graph, session, text, idempotency_key)
    return out


def improve(user, graph_id: int, session: str, outcome: str, alpha, idempotency_key: str) -> dict:
    """graph_improve: POST .../sessions/{sid}/outcome/."""
    graph = graph_for(user, graph_id, "report")
    data = validated(OutcomeSerializer, {"outcome": outcome, "alpha": alpha})
    body = reports.report_outcome(user, graph, session, data, idempotency_key)
    return {"session": session, **body}
