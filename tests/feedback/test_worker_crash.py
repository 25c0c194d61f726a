"""A worker killed in the middle of a batch leaves no partial batch; the retried task applies once;
a report the API accepted (202) is still in the outbox after its worker died, and the sweeper applies it.

The test holds a row lock on the surfaced edge, so the worker's outcome batch stops mid-transaction
(its session locked, its weight statement waiting for the edge). The worker is then killed with SIGKILL. Nothing
of the batch may become visible. The task is then delivered again with the same idempotency key (a
Redis broker redelivers an unacknowledged task by itself with acks_late; kombu's filesystem demo
broker drops it, so the test re-sends it as the redelivery would) and must apply exactly once.
"""

import os
import signal
import subprocess
import sys
import time

import pytest
from django.db import connection

from feedback.models import PendingReport, UpdateBatch, WeightHistory
from feedback.tasks import apply_outcome_task, sweep_reports_task
from graphadmin.models import AuditEvent, Edge
from tests.conftest import ROOT

from .conftest import make_session, raw_connection

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]
QUEUE = "feedback-crash-test"


def _start_worker(tmp_path, name):
    env = dict(os.environ, DATABASE_NAME=connection.settings_dict["NAME"])
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    log_path = tmp_path / f"{name}.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "graphadmin",
            "worker",
            "--loglevel=INFO",
            "--pool=solo",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-n",
            f"{name}@%h",
            "-Q",
            QUEUE,
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, log_path.read_text()
        time.sleep(0.2)
    return proc


def _wait(predicate, what, timeout=30):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_killed_worker_leaves_no_partial_batch_and_retry_applies_once(tmp_path, oscar, acme_graph, small_graph):
    n = small_graph
    edge = Edge.objects.get(source=n["a"], target=n["b"])
    make_session(acme_graph, "crash", [(n["b"], edge, True)])
    kwargs = {
        "graph_id": acme_graph.pk,
        "external_id": "crash",
        "outcome": "accepted",
        "idempotency_key": "crash-report-1",
    }

    locker, watcher = raw_connection(), raw_connection()
    locker.execute("BEGIN")
    locker.execute("SELECT id FROM graphadmin_edge WHERE id = %s FOR UPDATE", [edge.pk])
    worker = _start_worker(tmp_path, "crash1")
    try:
        apply_outcome_task.apply_async(kwargs=kwargs, queue=QUEUE)

        def blocked_backends():
            return watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                " AND query LIKE '%%INSERT INTO \"feedback_weightchange\"%%'"
            ).fetchall()

        try:
            _wait(lambda: blocked_backends(), "the worker to block mid-batch")
        except AssertionError:
            print(
                watcher.execute(
                    "SELECT pid, state, wait_event_type, wait_event, left(query, 200) FROM pg_stat_activity"
                    " WHERE datname = current_database()"
                ).fetchall()
            )
            raise
        ((pid,),) = blocked_backends()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        locker.execute("ROLLBACK")
    # The orphaned backend finishes its statement, finds its client gone and aborts the transaction.
    _wait(
        lambda: not watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(),
        "the orphan backend to end",
    )
    assert not UpdateBatch.objects.exists() and not WeightHistory.objects.exists()
    assert not AuditEvent.objects.filter(action="graph.feedback").exists()
    edge.refresh_from_db()
    assert edge.feedback_weight == 0.5

    worker = _start_worker(tmp_path, "crash2")
    try:
        first = apply_outcome_task.apply_async(kwargs=kwargs, queue=QUEUE).get(timeout=60)
        second = apply_outcome_task.apply_async(kwargs=kwargs, queue=QUEUE).get(timeout=60)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)
    locker.close()
    watcher.close()
    # With Redis the broker may also redeliver the original message itself; whichever delivery runs
    # first applies, every other one answers with that batch.
    assert first["status"] in ("applied", "duplicate") and second["status"] == "duplicate"
    assert UpdateBatch.objects.count() == 1 and WeightHistory.objects.count() == 2
    assert first["batch_id"] == second["batch_id"] == UpdateBatch.objects.get().pk
    edge.refresh_from_db()
    assert edge.feedback_weight == pytest.approx(0.55)


@pytest.fixture
def drains_on_crash_queue(monkeypatch):
    """Send this process's drain pokes to the crash test's own queue (a session worker may consume 'feedback')."""
    from celery.app import routes

    from graphadmin.celery import app

    route = {"queue": QUEUE}
    monkeypatch.setattr(
        app.amqp, "_rtable", routes.prepare({"feedback.drain_reports": route, "feedback.sweep_reports": route})
    )
    monkeypatch.setattr(app.amqp, "router", app.amqp.Router())  # the router is built once per process


def test_accepted_report_survives_a_killed_worker_and_the_sweeper_applies_it(
    tmp_path, api, ada, acme_graph, small_graph, drains_on_crash_queue, settings
):
    """A 202 is a promise: the worker dies before it applied the report; after a restart, the sweeper
    finds the report still pending in the outbox and it applies, once."""
    n = small_graph
    edge = Edge.objects.get(source=n["a"], target=n["b"])
    make_session(acme_graph, "crash-outbox", [(n["b"], edge, True)], owner=ada)

    locker, watcher = raw_connection(), raw_connection()
    locker.execute("BEGIN")
    locker.execute("SELECT id FROM graphadmin_edge WHERE id = %s FOR UPDATE", [edge.pk])
    worker = _start_worker(tmp_path, "outbox1")
    try:
        response = api(ada).post(
            f"/api/graphs/{acme_graph.pk}/sessions/crash-outbox/outcome/", {"outcome": "accepted"}, format="json"
        )
        assert response.status_code == 202 and response.data["status"] == "queued", response.data
        key = response.data["idempotency_key"]
        assert PendingReport.objects.get().idempotency_key == key

        def blocked_backends():
            return watcher.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
                " AND query LIKE '%%INSERT INTO \"feedback_weightchange\"%%'"
            ).fetchall()

        _wait(lambda: blocked_backends(), "the worker to block mid-report")
        ((pid,),) = blocked_backends()
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        locker.execute("ROLLBACK")
    _wait(
        lambda: not watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone(),
        "the orphan backend to end",
    )
    # Nothing applied, and the report is still there, pending.
    assert not UpdateBatch.objects.exists()
    assert PendingReport.objects.get(idempotency_key=key).state == "pending"

    worker = _start_worker(tmp_path, "outbox2")
    try:
        settings.OUTBOX_STALE_SECONDS = 0
        assert sweep_reports_task() == [acme_graph.pk]
        _wait(lambda: PendingReport.objects.get(idempotency_key=key).state != "pending", "the sweeper's drain", 60)
    finally:
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(timeout=20)
    locker.close()
    watcher.close()
    row = PendingReport.objects.get(idempotency_key=key)
    batch = UpdateBatch.objects.get()
    assert row.state == "applied" and row.result["batch_id"] == batch.pk and row.result["status"] == "applied"
    assert batch.idempotency_key == key and batch.kind == "outcome" and batch.trigger_user == ada
    edge.refresh_from_db()
    assert edge.feedback_weight == pytest.approx(0.55)
