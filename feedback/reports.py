"""Report intake shared by the REST API (feedback.api) and the MCP tools (feedback.mcp): no HTTP codes.

Each report takes the caller, a graph already found through ``graphadmin.tenancy`` with the
``report`` act, the session's external id, the serializer's validated data and the client's
idempotency key, and returns the answer's body. Its ``status`` is ``queued`` (the work is enqueued
on commit for the Celery worker), a logged no-op (``feedback_disabled``, ``unknown_session``,
``no_injection``, ``nothing_surfaced``: ``actions.fall_through``) or ``duplicate`` (an outcome equal
to the session's current one, with its batch). Items that are not live nodes or edges of the graph,
or one item with two signals, raise ``InputError`` naming the item; nothing is enqueued.

Before anything is resolved or enqueued, three checks (``check_reporter``, ``check_open``,
``check_surfaced``): only the session's owner, or an operator or admin, reports on it (Forbidden);
once the session's outcome is recorded, every report is refused (Conflict, a 409), except the same
outcome again, which stays ``duplicate``; a use report names only what the session's injections
surfaced to the agent (the selected candidates and the edges on their paths; candidates cut by the
budget were never shown, so they do not count), anything else is an ``InputError`` naming the item.
"""

from __future__ import annotations

import uuid

from django.db import transaction
from django.db.models import Q

from graphadmin.errors import Conflict, InputError
from graphadmin.models import Edge, Node
from graphadmin.tenancy import organization_role, require_session

from . import actions, queries, rules, tasks
from .models import AgentSession, InjectionCandidate, UpdateBatch


def enqueue(task, **kwargs) -> str:
    """Send ``task`` once the caller's transaction commits; return the task id chosen now (the reports
    below and the operation endpoints: decay, normalize)."""
    task_id = str(uuid.uuid4())
    transaction.on_commit(lambda: task.apply_async(kwargs=kwargs, task_id=task_id))
    return task_id


def _key(client_key: str, prefix: str, session: AgentSession) -> str:
    client = (client_key or "").strip()[:100]
    return f"{prefix}:{session.pk}:{('client:' + client) if client else uuid.uuid4().hex}"


def session_or_status(graph, external_id: str):
    """The graph's session with that external id, or (None, the logged no-op result) when feedback cannot apply."""
    context = {"graph": graph.pk, "session": external_id}
    if not graph.feedback_enabled:
        return None, actions.fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    session = AgentSession.objects.filter(graph=graph, external_id=external_id).first()
    if session is None:
        return None, actions.fall_through("unknown_session", "report for an unknown session", **context)
    return session, None


def check_reporter(user, graph, session: AgentSession) -> None:
    """Forbidden unless the caller may report on this session (``tenancy.may_act_on_session``): its
    owner, or an operator or admin of the graph's organization."""
    role = getattr(graph, "user_role", None) or organization_role(user, graph.organization_id)
    require_session(role, user.pk, session.owner_id, session.external_id)


def check_open(session: AgentSession) -> None:
    """Conflict (409) once the session's outcome is recorded: it is closed to further reports."""
    if session.outcome:
        when = f" at {session.outcome_at.isoformat()}" if session.outcome_at else ""
        raise Conflict(
            f"Session {session.external_id!r} already has its outcome ({session.outcome!r}, recorded{when}): "
            "it takes no more reports.",
            {"detail": "The session's outcome is recorded: it takes no more reports.", "outcome": session.outcome},
        )


def check_surfaced(session: AgentSession, items: list[dict]) -> None:
    """InputError naming the first item (resolved by ``resolve_use_items``) that the session's injections
    did not surface to the agent (``rules.first_unsurfaced``); one query."""
    nodes, edges = queries.surfaced_targets(session)
    unsurfaced = rules.first_unsurfaced([(i["kind"], i["id"]) for i in items], nodes, edges)
    if unsurfaced is not None:
        index, kind, pk = unsurfaced
        raise InputError(
            {"items": {index: {kind: [f"{kind.capitalize()} {pk} was not given to session {session.external_id!r}."]}}}
        )


def _no_op(result) -> dict:
    return {"status": result.status, "reason": result.details.get("reason", "")}


def _queued(task_id: str, key: str) -> dict:
    return {"status": "queued", "task_id": task_id, "idempotency_key": key}


def resolve_use_items(graph, items: list[dict]) -> list[dict]:
    """Turn node ids and edge ids/keys into checked ids of this graph (two queries, whatever the count)."""
    node_ids = {i["node"] for i in items if "node" in i}
    edge_ids = {i["edge"] for i in items if isinstance(i.get("edge"), int)}
    triplets = [i["edge"] for i in items if isinstance(i.get("edge"), dict)]
    nodes = set(Node.objects.filter(graph=graph, archived=False, pk__in=node_ids).values_list("pk", flat=True))
    edge_filter = Q(pk__in=edge_ids)
    for t in triplets:
        edge_filter |= Q(source_id=t["source"], target_id=t["target"], edge_type__name=t["type"])
    edges = {}
    for pk, src, dst, name in Edge.objects.filter(edge_filter, graph=graph, archived=False).values_list(
        "pk", "source_id", "target_id", "edge_type__name"
    ):
        edges[pk] = pk
        edges[(src, dst, name)] = pk
    out, seen = [], {}
    for index, item in enumerate(items):
        if "node" in item:
            if item["node"] not in nodes:
                raise InputError({"items": {index: {"node": [f"Unknown node {item['node']} in this graph."]}}})
            kind, pk = "node", item["node"]
        else:
            ref = item["edge"]
            pk = edges.get(ref if isinstance(ref, int) else (ref["source"], ref["target"], ref["type"]))
            if pk is None:
                raise InputError({"items": {index: {"edge": [f"Unknown edge {ref} in this graph."]}}})
            kind = "edge"
        if seen.setdefault((kind, pk), item["signal"]) != item["signal"]:
            raise InputError({"items": {index: {"signal": [f"{kind} {pk} is reported with two different signals."]}}})
        out.append({"kind": kind, "id": pk, "signal": item["signal"]})
    return out


def report_uses(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """Validated uses (UsesSerializer) of a session: resolve the items, enqueue reinforcement on commit."""
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    check_reporter(user, graph, session)
    check_open(session)
    items = resolve_use_items(graph, data["items"])
    check_surfaced(session, items)
    key = _key(client_key, "uses", session)
    task_id = enqueue(
        tasks.apply_uses_task,
        graph_id=graph.pk,
        external_id=external_id,
        items=items,
        learning_rate=data.get("learning_rate"),
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)


def report_response(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """A validated response text (ResponseTextSerializer): enqueue implicit-use detection on commit."""
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    check_reporter(user, graph, session)
    check_open(session)
    key = _key(client_key, "response", session)
    task_id = enqueue(
        tasks.apply_response_task,
        graph_id=graph.pk,
        external_id=external_id,
        response=data["response"],
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)


def report_outcome(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """A validated outcome (OutcomeSerializer): duplicate, a no-op status, or the EMA enqueued on commit."""
    outcome = data["outcome"]
    session, skipped = session_or_status(graph, external_id)
    if skipped:
        return _no_op(skipped)
    check_reporter(user, graph, session)
    context = {"graph": session.graph_id, "session": external_id, "outcome": outcome}
    if session.outcome == outcome:
        previous = UpdateBatch.objects.filter(trigger_session=session, kind="outcome").order_by("-id").first()
        if previous is not None:
            return {"status": "duplicate", "batch": previous.pk}
    check_open(session)
    # A selected candidate implies an injection: one query in the usual case.
    if not InjectionCandidate.objects.filter(
        graph_id=session.graph_id, injection__session=session, selected=True
    ).exists():
        if not session.injections.exists():
            return _no_op(actions.fall_through("no_injection", "the session has no context injection", **context))
        return _no_op(actions.fall_through("nothing_surfaced", "the session's injections surfaced nothing", **context))
    key = _key(client_key, "outcome", session)
    task_id = enqueue(
        tasks.apply_outcome_task,
        graph_id=session.graph_id,
        external_id=external_id,
        outcome=outcome,
        alpha=data.get("alpha"),
        idempotency_key=key,
        user_id=user.pk,
    )
    return _queued(task_id, key)
