"""feedback's MCP tool bodies: graph_record_use, graph_improve, and agent-written memory (graph_remember,
graph_link, graph_forget: feedback.memory); registered by graphadmin.agents.mcp_server.

Report intake, as through the REST API: the API's serializers validate, feedback.reports
queues the work for the Celery worker (act ``report``: an agent on its own sessions, operators and
admins on any; the session checks are feedback.reports').
"""

from __future__ import annotations

from typing import Any

from graphadmin.agents.mcp_tools import graph_for, invalid, validated
from graphadmin.tenancy import graph_access

from . import memory, reports
from .serializers import (
    ForgetSerializer,
    LinkSerializer,
    OutcomeSerializer,
    RememberSerializer,
    ResponseTextSerializer,
    UsesSerializer,
)


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


def _memory(user, graph_id: int, serializer_class, action, data: dict) -> dict:
    """One memory call as through the REST API: the ``remember`` act, the rate limit, the API's serializer."""
    access = graph_access(user, graph_id, "remember")
    memory.check_rate(user)
    values = validated(serializer_class, data)
    if "links" in values:
        values["links"] = [dict(link) for link in values["links"]]
    session = values.pop("session", None)
    return action(access.graph, values, actor=user, role=access.role, session_id=session)


def remember(user, graph_id: int, data: dict) -> dict:
    """graph_remember: POST /api/graphs/{id}/memory/remember/."""
    return _memory(user, graph_id, RememberSerializer, memory.do_remember, data)


def link(user, graph_id: int, data: dict) -> dict:
    """graph_link: POST /api/graphs/{id}/memory/link/."""
    return _memory(user, graph_id, LinkSerializer, memory.do_link, data)


def forget(user, graph_id: int, data: dict) -> dict:
    """graph_forget: POST /api/graphs/{id}/memory/forget/."""
    return _memory(user, graph_id, ForgetSerializer, memory.do_forget, data)
