"""Shared set-up of the benchmarks: a separate database on the same (embedded or DATABASE_URL) server.

The benchmarks never touch development or test data: they point Django at BENCH_DATABASE
(default ``graphadmin_bench``), create it if missing, and migrate it.
"""

from __future__ import annotations

import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH_DATABASE = os.environ.get("BENCH_DATABASE", "graphadmin_bench")


def configure_environment() -> None:
    """Point the settings at the bench database (call before anything reads the settings)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-insecure-key")
    os.environ["DATABASE_NAME"] = BENCH_DATABASE
    os.environ.setdefault("LOG_LEVEL", "WARNING")


def setup_django() -> None:
    """Configure Django on the bench database (created and migrated on first use)."""
    configure_environment()
    import django
    from django.conf import settings

    from graphadmin.runtime.embedded_db import ensure_database

    _create_database(ensure_database(settings.DATABASES["default"]))
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def _create_database(db: dict) -> None:
    import psycopg
    from psycopg import sql

    kwargs = {
        "host": db.get("HOST") or None,
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "port": db.get("PORT") or None,
        "dbname": "postgres",
        "autocommit": True,
    }
    with psycopg.connect(**{k: v for k, v in kwargs.items() if v is not None}) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db["NAME"]]).fetchone():
            conn.execute(sql.SQL("CREATE DATABASE {name}").format(name=sql.Identifier(db["NAME"])))


def summarize(samples_ms: list[float]) -> dict:
    """Median and p95 (nearest rank) of a list of milliseconds."""
    ordered = sorted(samples_ms)
    p95 = ordered[max(0, int(round(0.95 * len(ordered))) - 1)]
    return {"n": len(ordered), "median": statistics.median(ordered), "p95": p95}
