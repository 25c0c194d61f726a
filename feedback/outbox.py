"""The report outbox: every report the API accepts is a PendingReport row until the worker applies it.

A 202 is a promise. ``record`` writes the report in the request's own transaction (so it exists
exactly when the request commits), and ``feedback.reports`` pokes ``feedback.drain_reports`` for the
graph on commit. The Celery message is only a wake-up call: if it is lost (the filesystem broker
drops an unacknowledged message with its worker), the row is still there, and the beat sweeper
(``stale_graphs``) pokes the graph again.

``drain`` applies a graph's pending rows oldest first, in batches: one transaction per batch (rows
claimed ``FOR UPDATE SKIP LOCKED``, then each applied through ``feedback.actions`` in its own
savepoint, then every row's new state in one UPDATE), so a batch pays one commit, one claim and one
state write for all its reports, while each report keeps its own UpdateBatch, history and audit
event, exactly as when it ran alone. One drainer per graph at a time (``report_queries.try_drain_lock``): a
graph's reports apply in the order they were accepted, so a session's outcome always follows its
earlier use reports, and a report waiting out a backoff holds back the later reports of its session.

What happens to each row:

- applied (``applied``; ``result`` has the action's status and batch, which may be a logged no-op
  such as ``already_credited``), once: the row's ``idempotency_key`` is the batch's, so a second
  delivery of the same report (a retried drain, a client's retry) answers with the first batch;
- refused (``refused``; ``last_error`` says why) when the action refuses its input (an item archived
  since the 202): logged, never retried;
- any other error (a deadlock victim after ``ledger.retry_transient``'s retries, a lost connection):
  the row stays ``pending`` with ``attempts``, ``last_error`` and a backoff (``not_before``); after
  ``MAX_ATTEMPTS`` it is ``failed`` and logged as an error. An error of pressure (``ledger.under_pressure``:
  the database's disk full or out of memory, this worker's ``MemoryError``) backs off the same way but
  never fails the row: the report waits for the pressure to end, however long it lasts (a full disk
  for the ten minutes the backoff's eight attempts add up to would otherwise lose every report
  accepted before it). When the batch's own state write is refused too, its transaction rolls back
  whole and the rows stay as they were (pending), for the sweeper.
"""

from __future__ import annotations

import json
import logging
import time
from contextlib import nullcontext
from datetime import timedelta

from django.db import transaction
from django.db.models import Q

from graphadmin import audit, clock
from graphadmin.errors import DomainError
from graphadmin.models import Graph

from . import actions
from .ledger import Result, retry_transient, under_pressure
from .models import AgentSession, PendingReport
from .queries import reports as report_queries
from .report import Report, stale_items

log = logging.getLogger(__name__)

BATCH_SIZE = 50  # reports claimed per transaction
BATCH_SECONDS = 0.5  # a batch commits once it has run this long: its row locks are held briefly
DRAIN_SECONDS = 20.0  # one drain task's bound; a graph with more pending asks for another drain
MAX_ATTEMPTS = 8
BACKOFF_S = 2.0  # after the first failure; doubled each attempt, at most BACKOFF_MAX_S
BACKOFF_MAX_S = 300.0
DRAIN_ACTOR = "task:feedback.drain_reports"


def record(user, session: AgentSession, report: Report) -> None:
    """Store one accepted report (its ``payload``) in the caller's transaction (the request's).

    A key already stored (a client's retry with the same ``Idempotency-Key``) stores nothing: the
    report is applied once, under the first row. One named INSERT (``report_queries.INSERT_REPORT``):
    ``bulk_create``'s query building cost the intake more Python than the statement itself.
    """
    now = clock.now()
    report_queries.insert_report(
        {
            "graph": session.graph_id,
            "session": session.pk,
            "kind": report.kind,
            "payload": json.dumps(report.payload()),
            "key": report.key,
            "user": getattr(user, "pk", None),
            "now": now,
        }
    )


# Named SQL on the whole drain path (docs/decisions/0002-named-sql-in-the-drain.md); the wake-up's
# coalescing window (docs/decisions/0005-coalescing-window.md).
def drain(graph_id: int, *, batch_size: int = BATCH_SIZE, seconds: float = DRAIN_SECONDS, window: float = 0.0) -> dict:
    """Apply the graph's pending reports, batch after batch, until none is left or ``seconds`` ran out.

    ``window`` (seconds): the coalescing window of a wake-up. When the first claim finds reports that
    are younger than that, of sessions with no outcome claimed yet, the drain holds the graph's lock
    and looks again every ``WINDOW_STEP`` until those sessions' outcomes are in or the youngest report
    is ``window`` old, then applies everything in one batch. A session's use report and its outcome
    arrive a few tens of milliseconds apart: while the lock is held the outcome's poke finds the drain
    running and sends no task (``reports._poke``), so at one agent a session costs one drain and one
    batch instead of two. The worker's task passes ``OUTBOX_COALESCE_SECONDS``; a caller in a request
    (an eager task) or a test passes 0.

    Returns counts by row state, ``busy`` (another drainer holds the graph: it will see these rows)
    and ``more`` (time ran out with rows left: the caller asks for another drain).
    """
    started = time.monotonic()
    counts = {"applied": 0, "refused": 0, "pending": 0, "failed": 0, "batches": 0, "busy": False, "more": False}
    graph = None
    while True:
        with transaction.atomic():
            # The lock first: a poke that finds the drain busy (the usual case under load) costs one statement.
            if not report_queries.try_drain_lock(graph_id):
                counts["busy"] = True
                return counts
            rows = report_queries.claim_reports(graph_id, clock.now(), batch_size)
            if window > 0 and rows:
                rows = _coalesce(graph_id, rows, batch_size, window)
            window = 0.0  # the wake-up's window only: later batches are a backlog, not a session in flight
            if rows:
                graph = graph or report_queries.drain_graph(graph_id)
                if graph is None:
                    return counts
                counts["batches"] += 1
                for state in _apply_batch(graph, rows):
                    counts[state] += 1
        if len(rows) < batch_size:
            # The lock is released now. A report committed while we held it had its poke find the
            # lock taken, so look once more, in a new snapshot, before leaving (one statement; a full
            # batch goes straight on to the next claim).
            if not report_queries.reports_claimable(graph_id, clock.now()):
                return counts
        if time.monotonic() - started > seconds:
            counts["more"] = True
            return counts


WINDOW_STEP = 0.01  # seconds between two looks for a session's next report within the coalescing window


def _coalesce(graph_id: int, rows: list[PendingReport], batch_size: int, window: float) -> list[PendingReport]:
    """The claimed ``rows``, and what arrived within the coalescing window (``drain``): claimed again
    every ``WINDOW_STEP`` (this transaction's own locked rows come back with the new ones, in order)
    while the batch has room, some claimed session has no outcome yet, and the youngest row is not
    ``window`` old."""
    deadline = time.monotonic() + window  # a bound whatever the clock says
    while len(rows) < batch_size:
        open_sessions = {r.session_id for r in rows} - {r.session_id for r in rows if r.kind == "outcome"}
        youngest = max(r.created_at for r in rows)
        wait = min(window - (clock.now() - youngest).total_seconds(), deadline - time.monotonic())
        if not open_sessions or wait <= 0:
            break
        time.sleep(min(WINDOW_STEP, wait))
        # Each statement of this READ COMMITTED transaction reads a new snapshot: a report committed
        # since the last look is seen.
        rows = report_queries.claim_reports(graph_id, clock.now(), batch_size)
    return rows


def _apply_batch(graph: Graph, rows: list[PendingReport]) -> list[str]:
    """Apply claimed rows in order (one savepoint each), then write their states in one UPDATE.

    Read once for the whole batch: the sessions, the users, the graph's current policy (every report
    of a batch applies under the policy current at its start, as if they had run a moment earlier)
    and which reported items are still live (``report.stale_items``: an item archived since the 202
    refuses its report, in the intake's words). Rows not reached before ``BATCH_SECONDS`` are left
    as they were (claimed again by the next batch). Returns the new state of each row handled.
    """
    sessions = report_queries.drain_sessions(graph, {r.session_id for r in rows})
    policy = graph.current_policy()
    users = report_queries.drain_users({r.user_id for r in rows if r.user_id})
    reports = [Report.from_row(row) for row in rows]
    items = [i for r in reports for i in r.items]
    live_nodes, live_edges = report_queries.live_targets(
        graph.pk, {i.id for i in items if i.kind == "node"}, {i.id for i in items if i.kind == "edge"}
    )
    stale = stale_items(reports, live_nodes, live_edges)
    with audit.deferred() as events, actions.reused() as memo:
        done = _apply_rows(graph, rows, reports, sessions, users, policy, stale, (events, memo))
        events.flush()  # one audit event per applied report's batch, chained together
    report_queries.mark_reports(graph.pk, done)
    return [row.state for row in done]


def _apply_rows(graph, rows, reports, sessions, users, policy, stale, reuse) -> list[PendingReport]:
    """The batch's rows in order, until ``BATCH_SECONDS`` ran out: the rows handled."""
    started = time.monotonic()
    held_back: dict[int, object] = {}  # session id -> not_before of its row that failed
    done = []
    for position, (row, report) in enumerate(zip(rows, reports, strict=True)):
        if done and time.monotonic() - started > BATCH_SECONDS:
            break
        done.append(row)
        if row.session_id in held_back:
            # An earlier report of this session is waiting out its backoff: this one waits behind it.
            row.not_before = held_back[row.session_id]
            continue
        if position in stale:
            _refuse(row, stale[position], graph, sessions[row.session_id])
            continue
        actor = users.get(row.user_id) or DRAIN_ACTOR
        # The row lock holds its session (cascade).
        _apply_row(row, report, graph, sessions[row.session_id], actor, policy, *reuse)
        if row.state == "pending":
            held_back[row.session_id] = row.not_before
    return done


def _refuse(row: PendingReport, exc: DomainError, graph: Graph, session: AgentSession) -> None:
    """The input became invalid between the 202 and now (an edge archived meanwhile): refused, not retried."""
    context = {"graph": graph.pk, "session": session.external_id, "report": row.idempotency_key}
    log.warning("report refused", extra={"feedback_status": "refused", "error": str(exc), **context})
    field = getattr(exc, "field", "")
    row.state, row.last_error = "refused", str(exc)
    row.result = {"status": "refused", "reason": str(exc), "field": field if isinstance(field, str) else ""}
    row.applied_at = clock.now()


def _apply_row(
    row: PendingReport,
    report: Report,
    graph: Graph,
    session: AgentSession,
    actor,
    policy,
    events: audit.Deferred,
    memo: dict,
) -> None:
    """Apply one row's report (``actions.do_apply_report``) in a savepoint of the batch, so a failure
    undoes this report only; set the row's state, result and error (saved by the caller)."""
    context = {"graph": graph.pk, "session": session.external_id, "report": row.idempotency_key}

    def apply() -> Result:
        mark = events.mark()
        # An outcome writes in two transactions' worth (its EMA, then maybe links): one savepoint around
        # both. A use or response report writes in the one savepoint of do_record_uses (nothing before it).
        savepoint = transaction.atomic() if report.kind == "outcome" else nullcontext()
        try:
            with savepoint:
                return actions.do_apply_report(graph, session, report, actor=actor, policy=policy, targets_checked=True)
        except BaseException:
            events.undo_to(mark)  # this report's savepoint rolled back: so do its audit events
            memo.clear()  # and whatever it created (a question node) that later reports would reuse
            raise

    try:
        result = retry_transient(apply, what=f"feedback.{row.kind}")
    except DomainError as exc:
        _refuse(row, exc, graph, session)
        return
    except Exception as exc:
        if transaction.get_rollback():
            raise  # the savepoint could not be rolled back: the batch's transaction is lost, its rows stay pending
        row.attempts += 1
        row.last_error = f"{type(exc).__name__}: {exc}"[:2000]
        if row.attempts >= MAX_ATTEMPTS and not under_pressure(exc):
            row.state = "failed"
            log.error("report failed; not retried again", exc_info=True, extra={"attempts": row.attempts, **context})
        else:
            # Capped exponent: under pressure the attempts grow without bound.
            delay = min(BACKOFF_MAX_S, BACKOFF_S * 2 ** min(row.attempts - 1, 16))
            row.not_before = clock.now() + timedelta(seconds=delay)
            log.warning(
                "report failed; retried later", exc_info=True, extra={"attempts": row.attempts, "retry_in_s": delay}
            )
        return
    row.state, row.applied_at, row.last_error = "applied", clock.now(), ""
    row.result = {"status": result.status, "batch_id": result.batch_id, **_links(result)}


def _links(result: Result) -> dict:
    applied = result.links is not None and result.links.status == "applied"
    return {"links": result.links.batch_id} if applied else {}


def stale_graphs(*, stale_seconds: float) -> list[int]:
    """Graphs with a pending row the sweeper should drain: accepted more than ``stale_seconds`` ago
    (its poke was lost with a worker, or is stuck behind a backlog), or past a backoff."""
    now = clock.now()
    return sorted(
        PendingReport.objects.filter(state="pending", not_before__lte=now)
        .filter(Q(created_at__lt=now - timedelta(seconds=stale_seconds)) | Q(attempts__gt=0))
        .order_by()
        .values_list("graph_id", flat=True)
        .distinct()
    )


def purge(*, days: int) -> int:
    """Delete rows applied or refused more than ``days`` ago (their batches and the log are the
    record); pending and failed rows stay. Returns the rows deleted."""
    if days <= 0:
        return 0
    cutoff = clock.now() - timedelta(days=days)
    deleted, _ = PendingReport.objects.filter(state__in=("applied", "refused"), created_at__lt=cutoff).delete()
    return deleted
