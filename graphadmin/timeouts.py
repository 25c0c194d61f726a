"""PostgreSQL's ``statement_timeout`` for web requests (STATEMENT_TIMEOUT_MS), MCP tool calls and Celery
workers (WORKER_STATEMENT_TIMEOUT_MS, longer: decay, normalize and imports walk whole graphs)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection as default_connection
from django.db.backends.signals import connection_created


def set_statement_timeout(milliseconds: int, connection=None) -> None:
    """Set ``statement_timeout`` for the rest of the connection's session (0: no limit).

    Sent on the driver's connection, past Django's cursor: it is the connection's setting, not one
    of the request's queries (the query-count tests count only those).
    """
    connection = connection or default_connection
    connection.ensure_connection()
    connection.connection.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(milliseconds)}ms"])


def worker_connections_use_the_worker_timeout() -> None:
    """From now on every connection this process (and the pool it forks) opens gets WORKER_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_on_worker_connection, dispatch_uid="graphadmin-worker-statement-timeout")


def _on_worker_connection(sender, connection, **_kwargs):
    set_statement_timeout(settings.WORKER_STATEMENT_TIMEOUT_MS, connection)
