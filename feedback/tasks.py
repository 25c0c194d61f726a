"""Celery tasks of the feedback engine: thin. They take keys, re-fetch, and call ``feedback.actions``.

Reports the API accepted are rows of the outbox (``feedback.outbox``): ``drain_reports`` applies a
graph's pending rows (poked on commit of each report), ``sweep_reports`` (beat) pokes the graphs
whose rows were left pending, by a worker that died or a transient error's backoff. Those messages
carry nothing but a graph id and keep no result: the rows are the state. ``apply_uses``,
``apply_response`` and ``apply_outcome`` stay registered for messages an older version queued
(before the outbox): each builds the typed ``Report`` and applies it through the same action as the
drain (``actions.do_apply_report``); nothing in this version sends them.

Queues: ``feedback`` (uses, response, outcome, normalize), ``decay``, ``metrics`` (see
CELERY_TASK_ROUTES). Tasks are acknowledged late and rejected when the worker is lost (settings), so
a task whose worker dies mid-batch is redelivered; its transaction never committed, and its
idempotency key (one per report, chosen when it was enqueued) makes the redelivery apply once even
if the first run did commit before the crash. A report whose transaction PostgreSQL picks as a
deadlock victim (or refuses for serialization) is run again in the task, a few times with backoff
(``ledger.retry_transient``): every writer locks in one order, so that is a backstop.
"""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model

from graphadmin import outbox as task_outbox
from graphadmin.errors import DomainError
from graphadmin.models import Graph, PolicyRevision

from . import actions, imports, metrics, outbox, retention
from .ledger import retry_transient
from .models import AgentSession, VaultImport
from .report import Report

log = logging.getLogger(__name__)


def _actor(user_id, label):
    """The user who asked (so the audit names them), else the task's own label."""
    if user_id:
        user = get_user_model().objects.filter(pk=user_id).first()
        if user is not None:
            return user
    return label


def _refused(exc: DomainError, **context) -> dict:
    """Input that became invalid between the request and the task (an edge archived meanwhile):
    logged and answered, not raised, so the task is not retried forever."""
    field = getattr(exc, "field", "")
    field = field if isinstance(field, str) else ""
    log.warning("feedback task refused its input", extra={"feedback_status": "refused", "field": field, **context})
    return {"status": "refused", "field": field, "reason": getattr(exc, "message", str(exc)), **context}


def _graph(graph_id):
    return Graph.objects.select_related("organization").filter(pk=graph_id).first()


def _session(graph_id, external_id):
    return (
        AgentSession.objects.select_related("graph", "graph__organization")
        .filter(graph_id=graph_id, external_id=external_id)
        .first()
    )


@shared_task(name="feedback.drain_reports", ignore_result=True, bind=True)
def drain_reports_task(self, graph_id: int) -> dict:
    """Apply the graph's pending reports (``outbox.drain``); ask for another drain if time ran out.

    In a worker the wake-up waits up to ``OUTBOX_COALESCE_SECONDS`` for a session's next report (its
    coalescing window); run eagerly (inside a request, the tests) it does not, so no request waits."""
    counts = outbox.drain(graph_id, window=0.0 if self.request.is_eager else settings.OUTBOX_COALESCE_SECONDS)
    if counts["more"]:
        drain_reports_task.delay(graph_id=graph_id)
    return counts


@shared_task(name="feedback.sweep_reports", ignore_result=True)
def sweep_reports_task() -> list[int]:
    """Beat entry: poke the drain of every graph with reports left pending (``outbox.stale_graphs``)."""
    ids = outbox.stale_graphs(stale_seconds=settings.OUTBOX_STALE_SECONDS)
    for graph_id in ids:
        drain_reports_task.delay(graph_id=graph_id)
    if ids:
        log.warning("re-poked graphs with reports left pending", extra={"graphs": ids})
    return ids


@shared_task(name="feedback.purge_reports", ignore_result=True)
def purge_reports_task() -> int:
    """Beat entry: delete outbox rows applied or refused longer ago than OUTBOX_RETENTION_DAYS."""
    return outbox.purge(days=settings.OUTBOX_RETENTION_DAYS)


def _apply_message(graph_id: int, external_id: str, report: Report, user_id, label: str) -> dict:
    """A report given whole in a message of an older version (or a script): applied by the one action
    (``actions.do_apply_report``), as the drain applies an outbox row; refused input is an answer."""
    graph = _graph(graph_id)
    if graph is None:
        return actions.fall_through(
            "unknown_graph", "report for an unknown graph", graph=graph_id, session=external_id
        ).as_dict()
    session = _session(graph_id, external_id)
    if session is None:
        return actions.fall_through(
            "unknown_session", "report for an unknown session", graph=graph_id, session=external_id
        ).as_dict()
    session.graph = graph
    actor = _actor(user_id, label)
    try:
        return retry_transient(
            lambda: actions.do_apply_report(graph, session, report, actor=actor), what=label
        ).as_dict()
    except DomainError as exc:
        return _refused(exc, graph=graph_id, session=external_id)


# The three tasks below are kept registered only for messages an older version queued (before the
# outbox, the API sent them; it no longer does): each turns its message into a Report and applies it
# through the one action. Nothing in this version sends them.


@shared_task(name="feedback.apply_uses")
def apply_uses_task(
    graph_id: int,
    external_id: str,
    items: list[dict],
    source: str = "api",
    learning_rate=None,
    idempotency_key: str | None = None,
    user_id: int | None = None,
) -> dict:
    """A use report of an older version's message."""
    report = Report.from_payload(
        "uses", idempotency_key, {"items": items, "source": source, "learning_rate": learning_rate}
    )
    return _apply_message(graph_id, external_id, report, user_id, "task:feedback.apply_uses")


@shared_task(name="feedback.apply_response")
def apply_response_task(
    graph_id: int, external_id: str, response: str, idempotency_key: str | None = None, user_id: int | None = None
) -> dict:
    """A response text of an older version's message."""
    report = Report.from_payload("response", idempotency_key, {"response": response})
    return _apply_message(graph_id, external_id, report, user_id, "task:feedback.apply_response")


@shared_task(name="feedback.apply_outcome")
def apply_outcome_task(
    graph_id: int,
    external_id: str,
    outcome: str,
    alpha=None,
    idempotency_key: str | None = None,
    user_id: int | None = None,
) -> dict:
    """An outcome of an older version's message (an accepted one may then link notes, ``links``)."""
    report = Report.from_payload("outcome", idempotency_key, {"outcome": outcome, "alpha": alpha})
    return _apply_message(graph_id, external_id, report, user_id, "task:feedback.apply_outcome")


@shared_task(name="feedback.decay_graph")
def decay_graph_task(graph_id: int, user_id: int | None = None) -> dict:
    """Decay one graph for the current period (idempotent per period and chunk)."""
    graph = _graph(graph_id)
    if graph is None:
        return {"status": "unknown_graph", "graph": graph_id}
    return actions.do_decay(graph, actor=_actor(user_id, "task:feedback.decay")).as_dict()


@shared_task(name="feedback.decay_all")
def decay_all_task() -> list[int]:
    """Beat entry: one decay task per graph, each on the decay queue."""
    ids = list(Graph.objects.order_by("id").values_list("id", flat=True))
    for graph_id in ids:
        # Through the task outbox: a decay lost with a worker, or not sent, is sent again by the sweeper.
        task_outbox.send_now("feedback.decay_graph", args=[graph_id])
    return ids


@shared_task(name="feedback.normalize_graph")
def normalize_graph_task(graph_id: int, idempotency_key: str | None = None, user_id: int | None = None) -> dict:
    """Rescale a graph's edge weights so the largest is 1.0 (``actions.do_normalize``)."""
    graph = _graph(graph_id)
    if graph is None:
        return {"status": "unknown_graph", "graph": graph_id}
    return actions.do_normalize(
        graph, actor=_actor(user_id, "task:feedback.normalize"), idempotency_key=idempotency_key
    ).as_dict()


@shared_task(name="feedback.normalize_all")
def normalize_all_task() -> list[int]:
    """Beat entry: normalize every graph whose current policy uses the ``normalize`` ceiling mode."""
    latest = (
        PolicyRevision.objects.order_by("graph_id", "-revision")
        .distinct("graph_id")
        .values_list("graph_id", "ceiling_mode")
    )
    ids = [graph_id for graph_id, mode in latest if mode == "normalize"]
    today = datetime.now(UTC).date().isoformat()
    for graph_id in ids:
        # One run per graph and day: a duplicate beat tick skips the chunks already applied.
        task_outbox.send_now("feedback.normalize_graph", args=[graph_id], kwargs={"idempotency_key": f"beat-{today}"})
    return ids


@shared_task(name="feedback.rollup_metrics")
def rollup_metrics_task(graph_id: int, day: str) -> dict:
    """Recompute one graph's DailyMetric row for one day (an upsert: safe to retry)."""
    graph = Graph.objects.filter(pk=graph_id).first()
    if graph is None:
        return {"status": "unknown_graph", "graph": graph_id}
    row = metrics.rollup(graph, date.fromisoformat(day))
    return {"status": "applied", "graph": graph_id, "day": day, "id": row.pk}


@shared_task(name="feedback.rollup_metrics_all")
def rollup_metrics_all_task() -> list[int]:
    """Beat entry: roll up yesterday (now complete) and today (so far) for every graph."""
    today = datetime.now(UTC).date()
    ids = list(Graph.objects.order_by("id").values_list("id", flat=True))
    for graph_id in ids:
        for day in (today - timedelta(days=1), today):
            rollup_metrics_task.delay(graph_id, day.isoformat())
    return ids


@shared_task(name="feedback.maintain_history")
def maintain_history_task() -> dict:
    """Create next months' weight-history partitions; expire whole months past the retention setting."""
    created = retention.ensure_partitions()
    dropped = retention.do_expire_history(settings.WEIGHT_HISTORY_RETENTION_DAYS, actor="task:maintain_history")
    return {"created": created, "dropped": dropped}


@shared_task(
    name="feedback.import_vault",
    time_limit=settings.VAULT_IMPORT_TIME_LIMIT + 30,
    soft_time_limit=settings.VAULT_IMPORT_TIME_LIMIT,
)
def import_vault_task(import_id: int) -> dict:
    """A large vault import (feedback.imports.run_queued_import), within VAULT_IMPORT_TIME_LIMIT seconds.

    At the soft limit the import stops, rolls back and is recorded as failed with the reason; the hard
    limit 30 s later ends the process if it does not.
    """
    record = VaultImport.objects.select_related("graph", "requested_by").defer("archive").filter(pk=import_id).first()
    if record is None:
        return {"status": "gone", "import": import_id}
    actor = record.requested_by or "task:import_vault"
    record = imports.run_queued_import(record, actor=actor)
    return {"status": record.state, "import": record.pk}


@shared_task(name="feedback.maintain_candidate_log")
def maintain_candidate_log_task() -> dict:
    """Create next months' candidate-log partitions; expire whole months past CANDIDATE_LOG_RETENTION_DAYS."""
    created = retention.ensure_partitions(parents=tuple(retention.CANDIDATE_LOG))
    dropped = retention.do_expire_candidate_log(
        settings.CANDIDATE_LOG_RETENTION_DAYS, actor="task:maintain_candidate_log"
    )
    return {"created": created, "dropped": dropped}
