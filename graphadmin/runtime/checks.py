"""System checks: the database the service needs (PostgreSQL 18 or later, with pgvector), and the broker.

PostgreSQL 18 is the minimum because the bulk weight writes read the value they replace from
``RETURNING old.*`` (``feedback.queries``), and there is one copy of each. pgvector stores the node
and triplet embeddings. The embedded server (no ``DATABASE_URL``) is PostgreSQL 18 with pgvector, so
these checks speak to a server given by ``DATABASE_URL``. They are database checks: ``manage.py
migrate`` runs them before migrating, and ``manage.py check --database default`` on demand.

``check_security`` is a deployment check (``manage.py check --deploy``) of the Content-Security-Policy
and the cache the bad-token throttles count in.
"""

from __future__ import annotations

from django.conf import settings
from django.core.checks import Error, Warning
from django.db import connections

MIN_VERSION = 180000  # server_version_num of PostgreSQL 18.0


def problems(alias: str, vendor: str, version: int | None, vector_available: bool) -> list[Error]:
    """The errors for one database: its vendor, server version number and whether the ``vector``
    extension is available (installed or installable)."""
    if vendor != "postgresql":
        return [
            Error(
                f"Database '{alias}' is {vendor}; graphadmin needs PostgreSQL 18 or later with pgvector.",
                hint="Point DATABASE_URL at PostgreSQL 18+ with the pgvector extension, or unset it to use the "
                "embedded server.",
                id="graphadmin.E001",
            )
        ]
    errors = []
    if version is not None and version < MIN_VERSION:
        major, minor = version // 10000, version % 10000
        errors.append(
            Error(
                f"Database '{alias}' runs PostgreSQL {major}.{minor}; graphadmin needs PostgreSQL 18 or later "
                "(its bulk weight writes use RETURNING old.*, new in 18).",
                hint="Install PostgreSQL 18+ with pgvector (e.g. the postgresql-18 and postgresql-18-pgvector "
                "packages) and point DATABASE_URL at it, or unset DATABASE_URL to use the embedded server.",
                id="graphadmin.E001",
            )
        )
    if not vector_available:
        errors.append(
            Error(
                f"Database '{alias}' has no 'vector' extension available; graphadmin stores embeddings with pgvector.",
                hint="Install pgvector for this server (e.g. the postgresql-18-pgvector package, or build it from "
                "https://github.com/pgvector/pgvector), then run manage.py migrate.",
                id="graphadmin.E001",
            )
        )
    return errors


def check_database(app_configs=None, databases=None, **kwargs) -> list[Error]:
    """PostgreSQL 18+ with pgvector available, for each database the check is asked about (registered by
    ``GraphadminConfig.ready`` with the ``database`` tag)."""
    errors = []
    for alias in databases or ():
        connection = connections[alias]
        if connection.vendor != "postgresql":
            errors += problems(alias, connection.vendor, None, False)
            continue
        with connection.cursor() as cur:
            cur.execute("SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')")
            (vector_available,) = cur.fetchone()
        errors += problems(alias, connection.vendor, connection.pg_version, vector_available)
    return errors


FILESYSTEM_BROKER_MESSAGE = (
    "DEBUG is off and CELERY_BROKER_URL is unset (or filesystem://): Celery runs on kombu's filesystem "
    "transport, a zero-install demo broker. It drops a message whose worker dies (reports survive in the "
    "outbox and are drained again by the beat sweeper, but only every OUTBOX_SWEEP_SECONDS) and it does "
    "not reach workers on other machines."
)
FILESYSTEM_BROKER_HINT = "Set CELERY_BROKER_URL=redis://HOST:6379/0 in production (docs/deploy.md)."


def filesystem_broker_in_production(debug: bool, broker_url: str) -> bool:
    """Whether a production configuration (``DEBUG`` off) uses the filesystem broker."""
    return not debug and (broker_url or "filesystem://").startswith("filesystem://")


def check_broker(app_configs=None, **kwargs) -> list[Warning]:
    """A warning when a production configuration (DEBUG off) uses the filesystem broker (registered by
    ``GraphadminConfig.ready``; the Celery worker logs the same at start, ``graphadmin.celery``)."""
    if filesystem_broker_in_production(settings.DEBUG, settings.CELERY_BROKER_URL):
        return [Warning(FILESYSTEM_BROKER_MESSAGE, hint=FILESYSTEM_BROKER_HINT, id="graphadmin.W001")]
    return []


# ---------------------------------------------------------------------------------------------
# Deployment checks of the authentication and header settings (``manage.py check --deploy``).


def check_security(app_configs=None, **kwargs) -> list[Warning]:
    """A policy not enforced, or throttle counters each process keeps to itself, in a deployment."""
    found = []
    if not getattr(settings, "CONTENT_SECURITY_POLICY", None):
        found.append(
            Warning(
                "No Content-Security-Policy is enforced (CSP_MODE is not 'enforce').",
                hint="Set CSP_MODE=enforce (the default) once report-only shows no violation.",
                id="graphadmin.W101",
            )
        )
    backend = settings.CACHES["default"]["BACKEND"]
    if backend.endswith(("LocMemCache", "DummyCache")):
        found.append(
            Warning(
                f"The cache ({backend.rsplit('.', 1)[-1]}) is not shared between processes: bad-token "
                "throttles count per process.",
                hint="Set CACHE_URL to redis://... (or leave it unset: files under GRAPHADMIN_LOCAL_DIR, one machine).",
                id="graphadmin.W102",
            )
        )
    return found
