"""PostgreSQL's ``statement_timeout`` for web requests (STATEMENT_TIMEOUT_MS), MCP tool calls and Celery
workers (WORKER_STATEMENT_TIMEOUT_MS, longer: decay, normalize and imports walk whole graphs); web
requests also get ``lock_timeout`` (LOCK_TIMEOUT_MS) and ``idle_in_transaction_session_timeout``
(IDLE_IN_TRANSACTION_TIMEOUT_MS)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection as default_connection
from django.db.backends.signals import connection_created


def set_statement_timeout(milliseconds: int, connection=None, *, lock_ms: int | None = None, idle_ms=None) -> None:
    """Set ``statement_timeout`` for the rest of the connection's session (0: no limit), and with
    ``lock_ms`` / ``idle_ms`` its ``lock_timeout`` and ``idle_in_transaction_session_timeout`` (web requests).

    Sent on the driver's connection, past Django's cursor: it is the connection's setting, not one
    of the request's queries (the query-count tests count only those). One round trip for all three.
    """
    connection = connection or default_connection
    connection.ensure_connection()
    if lock_ms is None and idle_ms is None:
        connection.connection.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(milliseconds)}ms"])
        return
    connection.connection.execute(
        "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false),"
        " set_config('idle_in_transaction_session_timeout', %s, false)",
        [f"{int(milliseconds)}ms", f"{int(lock_ms or 0)}ms", f"{int(idle_ms or 0)}ms"],
    )


def worker_connections_use_the_worker_timeout() -> None:
    """From now on every connection this process (and the pool it forks) opens gets WORKER_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_on_worker_connection, dispatch_uid="graphadmin-worker-statement-timeout")


def _on_worker_connection(sender, connection, **_kwargs):
    set_statement_timeout(settings.WORKER_STATEMENT_TIMEOUT_MS, connection)
