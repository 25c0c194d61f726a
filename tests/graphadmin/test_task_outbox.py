"""The task outbox (graphadmin.outbox): a durable task whose message was lost with its worker is sent again
by the sweeper once its lease ran out, under the same task id, and a real worker runs it once; a run
that raised stays due; a row sent too often is given up, logged."""

import uuid
from datetime import timedelta

import pytest
from django.utils import timezone

from graphadmin import outbox
from graphadmin.models import OutboxTask
from tests.resilience import wait_for


def _row(**fields) -> OutboxTask:
    return OutboxTask.objects.create(
        task_id=str(uuid.uuid4()),
        name=fields.pop("name", "feedback.decay_graph"),
        not_before=timezone.now() - timedelta(seconds=1),
        **fields,
    )


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_task_lost_with_its_worker_is_sent_again_and_runs_once(celery_worker_process, acme_graph, small_graph):
    # As after a worker died holding the message (kombu's filesystem broker drops it): the row outlived its lease.
    row = _row(args=[acme_graph.pk], attempts=1, lease_seconds=60)
    assert outbox.sweep() == {"sent": 1, "unsent": 0, "failed": 0}
    resent = OutboxTask.objects.get(pk=row.pk)
    assert resent.attempts == 2 and resent.not_before > timezone.now() + timedelta(seconds=50)
    # The worker ran it to success: the row is gone (a run that raised would have kept it).
    wait_for(lambda: not OutboxTask.objects.filter(pk=row.pk).exists(), "the decay task to run", timeout=60)
    assert outbox.sweep() == {"sent": 0, "unsent": 0, "failed": 0}


@pytest.mark.django_db
def test_a_run_that_raised_stays_due_and_a_success_removes_the_row():
    failed, succeeded = _row(), _row()
    outbox.task_finished(failed.task_id, failed.name, "FAILURE")
    outbox.task_finished(succeeded.task_id, succeeded.name, "SUCCESS")
    outbox.task_finished(failed.task_id, "feedback.drain_reports", "SUCCESS")  # not a durable task: untouched
    failed.refresh_from_db()
    assert failed.last_error == "FAILURE"
    assert failed.not_before > timezone.now() + timedelta(seconds=outbox.RETRY_FAILED_SECONDS - 5)
    assert not OutboxTask.objects.filter(pk=succeeded.pk).exists()


@pytest.mark.django_db
def test_a_row_sent_too_often_is_given_up_and_logged(caplog):
    row = _row(attempts=outbox.MAX_ATTEMPTS)
    assert outbox.sweep()["failed"] == 1
    row.refresh_from_db()
    assert row.state == "failed"
    assert "given up" in caplog.text


def test_only_durable_tasks_go_through_the_outbox():
    with pytest.raises(AssertionError):
        outbox.send_on_commit("feedback.drain_reports", kwargs={"graph_id": 1})
