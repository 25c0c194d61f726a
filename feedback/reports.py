"""Report intake shared by the REST API (feedback.api) and the MCP tools (feedback.mcp): no HTTP codes.

Each report takes the caller, a graph already found through ``graphadmin.tenancy`` with the
``report`` act, the session's external id, the serializer's validated data and the client's
idempotency key, and returns the answer's body. Its ``status`` is ``queued`` (the report, a
``feedback.report.Report``, is stored in the outbox in the caller's transaction, ``feedback.outbox``,
and the graph's drain is poked on commit unless a drainer is running), a logged no-op
(``feedback_disabled``, ``unknown_session``,
``no_injection``, ``nothing_surfaced``: ``actions.fall_through``; ``graph_not_ready``: ``not_ready``)
or ``duplicate`` (an outcome equal
to the session's current one, with its batch). Items that are not live nodes or edges of the graph,
or one item with two signals, raise ``InputError`` naming the item; nothing is stored.

Before anything is resolved or stored, three checks (``check_reporter``, ``check_open``,
``check_surfaced``): only the session's owner, or an operator or admin, reports on it (Forbidden);
once the session's outcome is recorded, every report is refused (Conflict, a 409), except the same
outcome again, which stays ``duplicate``; a use report names only what the session's injections
surfaced to the agent (the selected candidates and the edges on their paths; candidates cut by the
budget were never shown, so they do not count), anything else is an ``InputError`` naming the item.
"""

from __future__ import annotations

import logging
import uuid

from django.db import DatabaseError, transaction

from graphadmin import outbox as task_outbox
from graphadmin.errors import Conflict, InputError
from graphadmin.tenancy import organization_role, require_session

from . import actions, outbox, rules, tasks
from .models import AgentSession, UpdateBatch
from .queries import reports as report_queries
from .report import Report, unknown_item
from .rules import UseItem

log = logging.getLogger(__name__)


def enqueue(task, **kwargs) -> str:
    """Send ``task`` once the caller's transaction commits; return the task id chosen now (the reports
    below and the operation endpoints: decay, normalize).

    A durable task (decay, normalize: ``graphadmin.outbox.DURABLE_TASKS``) is stored in the task
    outbox with the caller's transaction, so a broker outage or a dead worker loses nothing. Any
    other task is a wake-up call whose work is already stored (a drain of the report outbox): a
    failed send is logged, never raised (the request has committed and its 202 stands), and the
    beat sweeper delivers the work.
    """
    if task.name in task_outbox.DURABLE_TASKS:
        return task_outbox.send_on_commit(task.name, kwargs=kwargs)
    task_id = str(uuid.uuid4())
    transaction.on_commit(lambda: task_outbox.publish(task.name, kwargs=kwargs, task_id=task_id))
    return task_id


def _key(client_key: str, prefix: str, session: AgentSession) -> str:
    client = (client_key or "").strip()[:100]
    return f"{prefix}:{session.pk}:{('client:' + client) if client else uuid.uuid4().hex}"


def session_or_status(graph, external_id: str, kind: str):
    """(the graph's session with that external id and what a report of ``kind`` checks, a
    ``report_queries.ReportSession``, None), or (None, the logged no-op result) when feedback cannot apply."""
    context = {"graph": graph.pk, "session": external_id}
    if not graph.feedback_enabled:
        return None, actions.fall_through("feedback_disabled", "feedback is disabled for this graph", **context)
    found = report_queries.report_session(graph.pk, external_id, kind)
    if found is None:
        return None, actions.fall_through("unknown_session", "report for an unknown session", **context)
    return found, None


def check_reporter(user, graph, session: AgentSession) -> None:
    """Forbidden unless the caller may report on this session (``tenancy.may_act_on_session``): its
    owner, or an operator or admin of the graph's organization."""
    role = getattr(graph, "user_role", None) or organization_role(user, graph.organization_id)
    require_session(role, user.pk, session.owner_id, session.external_id)


def not_ready(session: AgentSession) -> dict | None:
    """The logged no-op ``graph_not_ready`` when a question of this session was answered while the graph's
    vectors were still being written (``AgentSession.vectors_pending``, set by the context call), else None.

    Learning never starts silently from a half-built graph: such an answer ranked without the notes a
    question could not reach yet, so what the agent used, did not use or thought of it says little about
    the ready graph, and what was learned from it stayed (issue 36). Refused rather than deferred: waiting
    does not change what the session was shown. Nothing is stored; the answer says why.
    """
    if not session.vectors_pending:
        return None
    result = actions.fall_through(
        "graph_not_ready",
        f"the session's context was answered while {session.vectors_pending} vectors were still being written: "
        "nothing is learned from it",
        graph=session.graph_id,
        session=session.external_id,
    )
    return {**_no_op(result), "vectors_pending": session.vectors_pending}


def check_open(session: AgentSession, pending: tuple[str, str] | None = None) -> None:
    """Conflict (409) once the session's outcome is recorded, or accepted and waiting in the outbox
    (``pending``, from ``report_queries.report_session``): the session is closed to further reports."""
    if session.outcome:
        when = f" at {session.outcome_at.isoformat()}" if session.outcome_at else ""
        raise Conflict(
            f"Session {session.external_id!r} already has its outcome ({session.outcome!r}, recorded{when}): "
            "it takes no more reports.",
            {"detail": "The session's outcome is recorded: it takes no more reports.", "outcome": session.outcome},
        )
    if pending is not None:
        raise Conflict(
            f"Session {session.external_id!r} already has an outcome ({pending[0]!r}) accepted and being applied: "
            "it takes no more reports.",
            {"detail": "The session's outcome is accepted: it takes no more reports.", "outcome": pending[0]},
        )


def check_surfaced(session: AgentSession, items: tuple[UseItem, ...], surfaced: tuple[set[int], set[int]]) -> None:
    """InputError naming the first item (resolved by ``resolve_use_items``) that the session's injections
    did not surface to the agent (``rules.first_unsurfaced``); ``surfaced``, the (nodes, edges) read with
    the session (``report_queries.report_session``)."""
    nodes, edges = surfaced
    unsurfaced = rules.first_unsurfaced([(i.kind, i.id) for i in items], nodes, edges)
    if unsurfaced is not None:
        index, kind, pk = unsurfaced
        raise InputError(
            {"items": {index: {kind: [f"{kind.capitalize()} {pk} was not given to session {session.external_id!r}."]}}}
        )


def _no_op(result) -> dict:
    return {"status": result.status, "reason": result.details.get("reason", "")}


def _accept(user, session: AgentSession, report: Report) -> dict:
    """Store the report in the outbox (this transaction) and poke the graph's drain once it commits."""
    outbox.record(user, session, report)
    task_id = str(uuid.uuid4())
    graph_id = session.graph_id
    transaction.on_commit(lambda: _poke(graph_id, task_id))
    return {"status": "queued", "task_id": task_id, "idempotency_key": report.key}


def _poke(graph_id: int, task_id: str) -> None:
    """After the report's commit: wake the graph's drain, unless a drainer holds its lock right now
    (under load, the usual case: that drainer applies this report, ``report_queries.drain_running``), so a
    burst of reports costs the worker one drain, not one task per report. A failed send is logged,
    never raised (the 202 stands; the sweeper delivers the report)."""
    try:
        if report_queries.drain_running(graph_id):
            return
    except DatabaseError:
        log.warning("could not tell whether the drain runs; poking it", exc_info=True, extra={"graph": graph_id})
    task_outbox.publish(tasks.drain_reports_task.name, kwargs={"graph_id": graph_id}, task_id=task_id)


def resolve_use_items(graph, items: list[dict]) -> tuple[UseItem, ...]:
    """Turn node ids and edge ids/keys into checked ids of this graph (a query for the nodes, one for the
    edges, each only when the report names one): the report's items, each a live node or edge of the
    graph, each target with one signal."""
    node_ids = {i["node"] for i in items if "node" in i}
    edge_ids = {i["edge"] for i in items if isinstance(i.get("edge"), int)}
    triplets = {(t["source"], t["target"], t["type"]) for i in items if isinstance(t := i.get("edge"), dict)}
    nodes = report_queries.live_nodes(graph.pk, node_ids) if node_ids else set()
    edges = {}
    for pk, src, dst, name in report_queries.live_edges(graph.pk, edge_ids, triplets) if edge_ids or triplets else ():
        edges[pk] = pk
        edges[(src, dst, name)] = pk
    out, seen = [], {}
    for index, item in enumerate(items):
        if "node" in item:
            if item["node"] not in nodes:
                raise unknown_item(index, "node", item["node"])
            kind, pk = "node", item["node"]
        else:
            ref = item["edge"]
            pk = edges.get(ref if isinstance(ref, int) else (ref["source"], ref["target"], ref["type"]))
            if pk is None:
                raise unknown_item(index, "edge", ref)
            kind = "edge"
        if seen.setdefault((kind, pk), item["signal"]) != item["signal"]:
            raise InputError({"items": {index: {"signal": [f"{kind} {pk} is reported with two different signals."]}}})
        out.append(UseItem(kind, pk, item["signal"]))
    return tuple(out)


def report_uses(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """Validated uses (UsesSerializer) of a session: resolve the items, enqueue reinforcement on commit."""
    found, skipped = session_or_status(graph, external_id, "uses")
    if skipped:
        return _no_op(skipped)
    session = found.session
    check_reporter(user, graph, session)
    if refused := not_ready(session):
        return refused
    check_open(session, found.pending)
    items = resolve_use_items(graph, data["items"])
    check_surfaced(session, items, found.surfaced)
    report = Report("uses", _key(client_key, "uses", session), items, learning_rate=data.get("learning_rate"))
    return _accept(user, session, report)


def report_response(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """A validated response text (ResponseTextSerializer): enqueue implicit-use detection on commit."""
    found, skipped = session_or_status(graph, external_id, "response")
    if skipped:
        return _no_op(skipped)
    session = found.session
    check_reporter(user, graph, session)
    if refused := not_ready(session):
        return refused
    check_open(session, found.pending)
    return _accept(user, session, Report("response", _key(client_key, "response", session), response=data["response"]))


def report_outcome(user, graph, external_id: str, data: dict, client_key: str = "") -> dict:
    """A validated outcome (OutcomeSerializer): duplicate, a no-op status, or the EMA enqueued on commit."""
    outcome = data["outcome"]
    found, skipped = session_or_status(graph, external_id, "outcome")
    if skipped:
        return _no_op(skipped)
    session, pending = found.session, found.pending
    check_reporter(user, graph, session)
    if refused := not_ready(session):
        return refused
    context = {"graph": session.graph_id, "session": external_id, "outcome": outcome}
    if session.outcome == outcome:
        previous = UpdateBatch.objects.filter(trigger_session=session, kind="outcome").order_by("-id").first()
        if previous is not None:
            return {"status": "duplicate", "batch": previous.pk}
    if pending is not None and pending[0] == outcome and not session.outcome:
        # The same outcome again while the first waits in the outbox (a client's retry): the first stands.
        return {"status": "queued", "task_id": None, "idempotency_key": pending[1]}
    check_open(session, pending)
    if not found.selected:
        if not found.injected:
            return _no_op(actions.fall_through("no_injection", "the session has no context injection", **context))
        return _no_op(actions.fall_through("nothing_surfaced", "the session's injections surfaced nothing", **context))
    report = Report("outcome", _key(client_key, "outcome", session), outcome=outcome, alpha=data.get("alpha"))
    return _accept(user, session, report)
