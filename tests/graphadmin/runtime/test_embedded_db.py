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
