"""The task outbox: a Celery task that must not be lost survives a broker outage and a worker's death.

A Celery message is only sent once its transaction commits, and sending it can fail (the broker is
down), or the message can be lost after it was sent (kombu's filesystem broker drops an
unacknowledged message with its worker). For the task families that must run (decay, normalize, a
queued vault import, embedding and re-embedding), ``send_on_commit`` writes an ``OutboxTask`` row in
the caller's transaction and sends the task once it commits:

- the send fails: the failure is logged (never raised: the request that asked has committed and
  answers as it would), the row stays due, and the beat sweeper (``graphadmin.sweep_outbox``,
  ``sweep``) sends it again once the broker answers;
- the task succeeds: the worker deletes the row (``task_finished``, on Celery's ``task_postrun``);
  a run that raised leaves it due again ``RETRY_FAILED_SECONDS`` later (a database outage passes);
- the worker dies with the task: the row outlives its lease (``lease_seconds``, longer than the
  task may run) and the sweeper sends it again, under the same task id.

The tasks sent this way are idempotent (decay per period, normalize per key, an import by its
record's state, embedding fills what is missing), so a second delivery applies nothing twice.
After ``MAX_ATTEMPTS`` sends the row is ``failed`` and logged as an error. Reports have their own
outbox (``feedback.outbox``): their rows are the work itself.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta

from celery import current_app
from celery.signals import task_postrun
from django.db import transaction
from django.utils import timezone

from graphadmin.models import OutboxTask

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 10
DEFAULT_LEASE_SECONDS = 900
RETRY_FAILED_SECONDS = 60  # a run that raised is sent again this long after (its attempts are capped)
# The task names sent through this outbox: only their runs touch a row (one statement per such run).
DURABLE_TASKS = frozenset(
    {
        "feedback.decay_graph",
        "feedback.normalize_graph",
        "feedback.import_vault",
        "graphadmin.embed_graph",
        "graphadmin.reembed_graph",
    }
)


def publish(name: str, *, args=(), kwargs=None, task_id: str, queue: str = "") -> bool:
    """Send a task now; True when the broker took it, False (logged) when it refused or was down."""
    options = {"task_id": task_id}
    if queue:
        options["queue"] = queue
    try:
        # retry=False: a broker that is down answers at once instead of holding the request for its retries.
        # The registered task's apply_async (not send_task), so task_always_eager runs it in-process.
        task = current_app.tasks.get(name)
        if task is not None:
            task.apply_async(args=list(args), kwargs=kwargs or {}, retry=False, **options)
        else:
            current_app.send_task(name, args=list(args), kwargs=kwargs or {}, retry=False, **options)
    except Exception as exc:  # any broker failure: the caller's work is committed and stays promised
        log.warning(
            "task not sent; it is sent again once the broker answers",
            extra={"task_name": name, "task_id": task_id, "error": f"{type(exc).__name__}: {exc}"[:500]},
        )
        return False
    return True


def send_on_commit(
    name: str, *, args=(), kwargs=None, queue: str = "", lease_seconds: int = DEFAULT_LEASE_SECONDS, task_id=None
) -> str:
    """Store the task in the caller's transaction and send it once that commits; return its task id.

    Outside a transaction (a beat task fanning out, a command) the row commits at once and the
    task is sent at once.
    """
    assert name in DURABLE_TASKS, f"{name} is not a durable task (graphadmin.outbox.DURABLE_TASKS)"
    task_id = task_id or str(uuid.uuid4())
    row = OutboxTask.objects.create(
        task_id=task_id,
        name=name,
        args=list(args),
        kwargs=kwargs or {},
        queue=queue,
        lease_seconds=lease_seconds,
        not_before=timezone.now() + timedelta(seconds=lease_seconds),
    )
    pk = row.pk

    def send():
        if not publish(name, args=args, kwargs=kwargs, task_id=task_id, queue=queue):
            # Due at once: the sweeper sends it as soon as the broker answers, not a lease later.
            OutboxTask.objects.filter(pk=pk).update(not_before=timezone.now(), last_error="not sent: broker refused")

    transaction.on_commit(send)
    return task_id


def send_now(name: str, *, args=(), kwargs=None, queue: str = "", lease_seconds: int = DEFAULT_LEASE_SECONDS) -> str:
    """Store the task and send it at once, whatever transaction is open: for a beat task fanning out
    (decay_all, normalize_all), which runs outside any transaction, so the row is committed before
    the send. A failed send leaves the row due for the sweeper, as ``send_on_commit`` does."""
    assert name in DURABLE_TASKS, f"{name} is not a durable task (graphadmin.outbox.DURABLE_TASKS)"
    task_id = str(uuid.uuid4())
    row = OutboxTask.objects.create(
        task_id=task_id,
        name=name,
        args=list(args),
        kwargs=kwargs or {},
        queue=queue,
        lease_seconds=lease_seconds,
        not_before=timezone.now() + timedelta(seconds=lease_seconds),
    )
    if not publish(name, args=args, kwargs=kwargs, task_id=task_id, queue=queue):
        OutboxTask.objects.filter(pk=row.pk).update(not_before=timezone.now(), last_error="not sent: broker refused")
    return task_id


def task_finished(task_id: str, name: str, state: str) -> None:
    """A worker ran the task to its end (Celery's ``task_postrun``): its row is done, or due again if it raised."""
    if name not in DURABLE_TASKS or not task_id:
        return
    try:
        rows = OutboxTask.objects.filter(task_id=task_id)
        if state == "SUCCESS":
            rows.delete()
        else:
            rows.update(not_before=timezone.now() + timedelta(seconds=RETRY_FAILED_SECONDS), last_error=state)
    except Exception:  # the database is away: the row's lease runs out and the sweeper sends it again
        log.warning("outbox row not updated after its task", exc_info=True, extra={"task_id": task_id})


def sweep(*, limit: int = 500) -> dict:
    """Send again every row past its ``not_before`` (not sent, or its worker died); returns counts."""
    now = timezone.now()
    counts = {"sent": 0, "unsent": 0, "failed": 0}
    due = list(OutboxTask.objects.filter(state="pending", not_before__lte=now).order_by("not_before", "id")[:limit])
    for row in due:
        row.attempts += 1
        if row.attempts > MAX_ATTEMPTS:
            OutboxTask.objects.filter(pk=row.pk).update(state="failed", attempts=row.attempts)
            log.error("task given up after repeated sends", extra={"task_name": row.name, "task_id": row.task_id})
            counts["failed"] += 1
            continue
        sent = publish(row.name, args=row.args, kwargs=row.kwargs, task_id=row.task_id, queue=row.queue)
        # Sent: it has its lease again. Not sent: the broker is still down; try at the next sweep without
        # spending an attempt (an outage of any length loses nothing).
        OutboxTask.objects.filter(pk=row.pk).update(
            attempts=row.attempts if sent else row.attempts - 1,
            not_before=now + timedelta(seconds=row.lease_seconds) if sent else now,
            last_error="" if sent else "not sent: broker refused",
        )
        counts["sent" if sent else "unsent"] += 1
        if not sent:
            break  # the broker is down: the rest waits for the next sweep
    if counts["sent"] or counts["failed"]:
        log.warning("outbox sweep sent tasks again", extra=counts)
    return counts


@task_postrun.connect(dispatch_uid="graphadmin.outbox.task_finished")
def _on_task_postrun(sender=None, task_id=None, state=None, **_kwargs):
    """Celery's task_postrun, in the worker (connected when Django loads: ``GraphadminConfig.ready``)."""
    task_finished(task_id, getattr(sender, "name", ""), state)
