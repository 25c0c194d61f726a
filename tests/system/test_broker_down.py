"""A 202 stays a promise when the broker is down (issue 26, item 1): every task family, with a broker of the
test's own that is stopped while the web server and the commands accept work, then started again.

The web server (gunicorn), the worker, beat and the commands are real processes on the test database,
on a Redis broker the test starts itself (port 6390; never the machine's). While it is down: reports
(use and outcome) answer 202 and stay in the report outbox; a decay run, a background vault import,
an import's embedding and a re-embedding answer as usual and stay in the task outbox (their send failed,
logged). Once the broker is back, beat's sweepers send them again and the worker applies each once.
"""

import io
import json
import subprocess
import sys
import time
import zipfile

import pytest

from feedback.models import PendingReport, UpdateBatch, VaultImport
from graphadmin.accounts import create_token
from graphadmin.models import Edge, Graph, Node, OutboxTask
from tests.conftest import ROOT, stop
from tests.feedback.conftest import make_session
from tests.resilience import REDIS_PORT, base_env, celery, port_open, redis_server, send, wait_for, web_server

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HASHING = "graphadmin.embeddings.HashingEmbedder"
BROKER = f"redis://127.0.0.1:{REDIS_PORT}/0"
ENV = {
    "CELERY_BROKER_URL": BROKER,
    "CELERY_RESULT_BACKEND": "",
    "EMBEDDER": HASHING,
    "VAULT_IMPORT_ASYNC_BYTES": 10,  # every upload imports in the background
    "VAULT_IMPORT_SYNC_EMBED_LIMIT": 0,  # every import leaves its vectors to the embeddings task
    "OUTBOX_SWEEP_SECONDS": 1,
    "OUTBOX_STALE_SECONDS": 1,
}


def _zip_of(folder) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, path.relative_to(folder).as_posix())
    return buffer.getvalue()


def _multipart(fields: dict, filename: str, data: bytes) -> tuple[bytes, str]:
    boundary = "----graphadmin-test-boundary"
    parts = []
    for name, value in fields.items():
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{filename}"\r\n'
        "Content-Type: application/zip\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _manage(*args) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=base_env(**ENV), capture_output=True, text=True, timeout=120
    )


def test_every_task_family_survives_a_broker_outage(tmp_path, ada, oscar, acme, acme_graph, small_graph):
    n = small_graph
    edge = Edge.objects.get(source=n["a"], target=n["b"])
    make_session(acme_graph, "down-1", [(n["b"], edge, True)], ada)
    # A graph whose vectors are another model's (for the re-embedding), and one the import command fills.
    stale = Graph.objects.create(organization=acme, slug="stale", name="stale")
    for key in "xy":
        Node.objects.create(
            graph=stale, key=key, title=key, text=f"note {key}", embedding=[0.1] * 384, embedding_model="old"
        )
    imported = Graph.objects.create(organization=acme, slug="imported", name="imported")
    agent = {"Authorization": f"Token {create_token(ada)}", "Content-Type": "application/json"}
    operator = {"Authorization": f"Token {create_token(oscar)}"}
    api = f"/api/graphs/{acme_graph.pk}"
    assert not port_open(REDIS_PORT)  # the broker is down from the start

    with web_server(tmp_path, **ENV) as url:
        uses = json.dumps({"items": [{"node": n["b"].pk, "signal": "explicit"}]}).encode()
        status, _, body = send(f"{url}{api}/sessions/down-1/uses/", uses, agent)
        assert status == 202, body
        status, _, body = send(f"{url}{api}/sessions/down-1/outcome/", b'{"outcome": "accepted"}', agent)
        assert status == 202, body
        status, _, body = send(f"{url}{api}/decay/", b"", operator)
        assert status == 202, body
        form, content_type = _multipart({"dry_run": "false"}, "vault.zip", _zip_of(ROOT / "tests/fixtures/vault"))
        status, _, body = send(f"{url}{api}/import/", form, {**operator, "Content-Type": content_type})
        assert status == 202, body
    # --no-wait: the import returns with its vectors pending (it waits for them by default, and the broker is down).
    done = _manage(
        "import_vault", str(ROOT / "tests/fixtures/vault"), "--graph", "imported", "--embed", "task", "--no-wait"
    )
    assert done.returncode == 0, done.stderr
    done = _manage("reembed", "--graph", "stale", "--task")
    assert done.returncode == 0, done.stderr

    assert PendingReport.objects.filter(state="pending").count() == 2
    rows = {row.name: row for row in OutboxTask.objects.all()}
    assert set(rows) == {
        "feedback.decay_graph",
        "feedback.import_vault",
        "graphadmin.embed_graph",
        "graphadmin.reembed_graph",
    }
    assert all(row.last_error.startswith("not sent") for row in rows.values())
    assert Node.objects.filter(graph=imported, embedding__isnull=True).exists()

    with redis_server() as _stop:
        started = time.monotonic()
        worker = celery(tmp_path, "worker", "down-worker", **ENV)
        beat = celery(tmp_path, "beat", "down-beat", **ENV)
        try:

            def everything_applied():
                return (
                    not PendingReport.objects.filter(state="pending").exists()
                    and not OutboxTask.objects.exists()
                    and VaultImport.objects.filter(state="succeeded").exists()
                    and not Node.objects.filter(graph=imported, embedding__isnull=True).exists()
                    and not Node.objects.filter(graph=stale, embedding_model="old").exists()
                )

            wait_for(everything_applied, "every task applied", timeout=120, interval=0.5)
            recovered = time.monotonic() - started
        finally:
            stop(beat)
            stop(worker)
    assert set(PendingReport.objects.values_list("state", flat=True)) == {"applied"}
    batches = UpdateBatch.objects.filter(graph=acme_graph)
    assert batches.filter(kind="reinforce").count() == 1
    assert batches.filter(kind="outcome").count() == 1
    # The decay task ran to success: its outbox row is gone (a run that raised would have kept it).
    assert batches.filter(kind="import").count() == 1
    print(f"recovered {recovered:.1f} s after the broker came back")
