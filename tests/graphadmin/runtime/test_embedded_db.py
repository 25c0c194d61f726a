"""The embedded database starts on a process's first connection, not when the settings are read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from django.db import connection

from graphadmin.runtime.embedded_db import ENGINE, ensure_database, settings_for
from tests.conftest import ROOT


def test_reading_the_settings_starts_no_server(tmp_path):
    env = {
        **os.environ,
        "GRAPHADMIN_LOCAL_DIR": str(tmp_path),
        "SECRET_KEY": "x",
        "DJANGO_SETTINGS_MODULE": "graphadmin.settings",
    }
    env.pop("DATABASE_URL", None)
    script = (
        "import django; django.setup(); from django.conf import settings; "
        "d = settings.DATABASES['default']; print(d['ENGINE'], repr(d['HOST']))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [ENGINE, "''"]
    assert not (tmp_path / "pgdata").exists()


def test_settings_of_another_server_or_a_known_host_are_left_as_they_are():
    external = {"ENGINE": "django.db.backends.postgresql", "NAME": "graphadmin", "HOST": ""}
    assert ensure_database(external) == {"ENGINE": "django.db.backends.postgresql", "NAME": "graphadmin", "HOST": ""}
    started = {**settings_for(Path("/nonexistent/pgdata")), "HOST": "/run/graphadmin"}
    assert ensure_database(started)["HOST"] == "/run/graphadmin"


def test_the_first_connection_fills_in_the_host(db):
    connection.ensure_connection()
    if connection.settings_dict["ENGINE"] == ENGINE:
        assert connection.settings_dict["HOST"]
        assert Path(connection.settings_dict["PGDATA"]).is_dir()
    assert connection.cursor().execute("SELECT 1").fetchone() == (1,)


def test_threads_opening_their_first_connections_at_once_start_the_server_once(db, monkeypatch):
    """A gunicorn worker's threads connect at once: one of them starts the server, the others wait for its host
    (pgserver's start-up is safe between processes, not between the threads of one: it raised under load)."""
    import threading
    import time

    from graphadmin.runtime import embedded_db

    connection.ensure_connection()
    if connection.settings_dict["ENGINE"] != ENGINE:
        return  # DATABASE_URL: no embedded server to start
    real, calls = embedded_db.ensure_server, []

    def slow_start(data_dir):
        calls.append(data_dir)
        time.sleep(0.2)  # the window in which the other threads arrive
        return real(data_dir)

    monkeypatch.setattr(embedded_db, "ensure_server", slow_start)
    shared = {**connection.settings_dict, "HOST": ""}
    barrier, hosts, errors = threading.Barrier(8), [], []

    def first_connection():
        barrier.wait()
        try:
            hosts.append(ensure_database(shared)["HOST"])
        except Exception as exc:  # noqa: BLE001 - every thread's failure is reported below
            errors.append(exc)

    threads = [threading.Thread(target=first_connection) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == [] and len(calls) == 1
    assert hosts == [connection.settings_dict["HOST"]] * 8
