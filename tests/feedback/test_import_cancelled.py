"""An import killed halfway leaves no half-written graph (issue 41, item 6): nothing of it is visible, and
it can be run again to the end, once.

"Halfway" is made certain, not timed: the test holds its organization's audit lock (the advisory lock
``graphadmin.audit`` takes before appending), so the import stops at its last step, every node, edge and
history row written in its transaction, waiting to append its audit event. Then its process is killed
with SIGKILL (as the OOM killer would; a SIGTERM ends the command the same way, without a handler). The
large archive, measured: ``python -m bench.bigimport`` (docs/resilience.md).
"""

import io
import os
import signal
import subprocess
import sys
import time
import zipfile

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection

from feedback.imports import do_queue_import
from feedback.models import UpdateBatch
from feedback.tasks import import_vault_task
from graphadmin import outbox as task_outbox
from graphadmin.models import AuditEvent, Edge, Node
from graphadmin.runtime.locks import AdvisoryLock
from tests.conftest import HASHING, ROOT

from .conftest import raw_connection
from .test_worker_crash import QUEUE, _start_worker

pytestmark = pytest.mark.django_db(transaction=True)
NOTES = 30
PARKED = "test-import-parked"  # a queue no worker of the suite reads


def _vault(folder):
    for i in range(NOTES):
        (folder / f"note-{i}.md").write_text(f"# Note {i}\n\nSee [[note-{(i + 1) % NOTES}]].\n")
    return folder


def _zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(NOTES):
            archive.writestr(f"Vault/note-{i}.md", f"# Note {i}\n\nSee [[note-{(i + 1) % NOTES}]].\n")
    return buffer.getvalue()


def _wait(predicate, what, timeout=180):  # a worker starting on a loaded machine takes a while
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)
    return found


def _waiting_on_the_audit_lock(watcher):
    return watcher.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        " AND wait_event = 'advisory'"
    ).fetchall()


def _gone(watcher, pid):
    return not watcher.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()


def _nothing_of_it(graph):
    assert not Node.objects.filter(graph=graph).exists() and not Edge.objects.filter(graph=graph).exists()
    assert not UpdateBatch.objects.filter(graph=graph, kind="import").exists()
    assert not AuditEvent.objects.filter(action="graph.import").exists()


def _held_audit_lock(org):
    locker = raw_connection()
    locker.execute("SELECT pg_advisory_lock(%s, %s)", [int(AdvisoryLock.AUDIT), org.pk])
    return locker


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill", "term"])
def test_an_import_command_killed_halfway_leaves_nothing_and_runs_again_once(sig, tmp_path, acme, acme_graph):
    vault = _vault(tmp_path)
    env = dict(os.environ, DATABASE_NAME=connection.settings_dict["NAME"], EMBEDDER=HASHING)
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    command = [sys.executable, "manage.py", "import_vault", str(vault), "--graph", "memory", "--org", "acme"]
    command += ["--embed", "sync", "--no-progress"]
    watcher, locker = raw_connection(), _held_audit_lock(acme)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        ((pid,),) = _wait(lambda: _waiting_on_the_audit_lock(watcher), "the import to reach its audit event")
        # Every row of the import is written, in its open transaction: the database holds them, uncommitted.
        proc.send_signal(sig)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        locker.close()  # the lock released
    _wait(lambda: _gone(watcher, pid), "the killed import's backend to end")
    watcher.close()
    _nothing_of_it(acme_graph)

    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert Node.objects.filter(graph=acme_graph).count() == NOTES
    assert Edge.objects.filter(graph=acme_graph).count() == NOTES
    assert UpdateBatch.objects.filter(graph=acme_graph, kind="import").count() == 1
    assert AuditEvent.objects.filter(action="graph.import").count() == 1


@pytest.mark.worker
@pytest.mark.embedder(HASHING)
def test_a_worker_killed_mid_import_leaves_it_resumable_and_the_redelivery_imports_once(
    tmp_path, oscar, acme, acme_graph, monkeypatch
):
    """The REST import's task: its worker killed with the import written but not committed leaves the graph
    as it was and the VaultImport ``importing`` with its archive; the outbox's redelivery imports it, once."""
    monkeypatch.setenv("EMBEDDER", HASHING)  # the worker's too
    # Its on-commit send goes to a queue no worker reads: in the suite, the session's Celery worker serves the
    # usual one and would run the same import beside this test's worker, then commit it once the lock is free.
    send = task_outbox.send_on_commit
    monkeypatch.setattr(task_outbox, "send_on_commit", lambda *a, **k: send(*a, **{**k, "queue": PARKED}))
    upload = SimpleUploadedFile("vault.zip", _zip(), content_type="application/zip")
    record = do_queue_import(acme_graph, upload, actor=oscar)
    watcher, locker = raw_connection(), _held_audit_lock(acme)
    worker = _start_worker(tmp_path, "import1")
    try:
        import_vault_task.apply_async(args=[record.pk], queue=QUEUE)
        ((pid,),) = _wait(lambda: _waiting_on_the_audit_lock(watcher), "the import to reach its audit event")
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            os.killpg(worker.pid, signal.SIGKILL)
        locker.close()
    _wait(lambda: _gone(watcher, pid), "the killed import's backend to end")
    watcher.close()
    _nothing_of_it(acme_graph)
    record.refresh_from_db()
    assert record.state == "importing" and bytes(record.archive) == upload.file.getvalue()  # resumable

    # The redelivery (the task outbox sends it again once its lease ran out), here run in this process.
    assert import_vault_task(record.pk)["status"] == "succeeded"
    record.refresh_from_db()
    assert record.counts["nodes_created"] == NOTES and not bytes(record.archive)
    assert Node.objects.filter(graph=acme_graph).count() == NOTES
    assert UpdateBatch.objects.filter(graph=acme_graph, kind="import").count() == 1
    assert import_vault_task(record.pk)["status"] == "succeeded"  # a late duplicate: nothing again
    assert UpdateBatch.objects.filter(graph=acme_graph, kind="import").count() == 1
