"""PostgreSQL's ``statement_timeout`` for web requests (STATEMENT_TIMEOUT_MS), MCP tool calls and Celery
workers (WORKER_STATEMENT_TIMEOUT_MS, longer: decay, normalize and imports walk whole graphs); web
requests also get ``lock_timeout`` (LOCK_TIMEOUT_MS) and ``idle_in_transaction_session_timeout``
(IDLE_IN_TRANSACTION_TIMEOUT_MS)."""

from __future__ import annotations

from django.conf import settings
from django.db import connection as default_connection
from django.db import transaction
from django.db.backends.signals import connection_created


def set_statement_timeout(milliseconds: int, connection=None, *, lock_ms: int | None = None, idle_ms=None) -> None:
    """Set ``statement_timeout`` for the rest of the connection's session (0: no limit), and with
    ``lock_ms`` / ``idle_ms`` its ``lock_timeout`` and ``idle_in_transaction_session_timeout`` (web requests).

    Sent on the driver's connection, past Django's cursor: it is the connection's setting, not one
    of the request's queries (the query-count tests count only those). One round trip for all three.
    """
    connection = connection or default_connection
    connection.ensure_connection()
    connection.connection._graphadmin_timeouts = None  # whatever was remembered no longer holds (remember_timeouts)
    if lock_ms is None and idle_ms is None:
        connection.connection.execute("SELECT set_config('statement_timeout', %s, false)", [f"{int(milliseconds)}ms"])
        return
    connection.connection.execute(
        "SELECT set_config('statement_timeout', %s, false), set_config('lock_timeout', %s, false),"
        " set_config('idle_in_transaction_session_timeout', %s, false)",
        [f"{int(milliseconds)}ms", f"{int(lock_ms or 0)}ms", f"{int(idle_ms or 0)}ms"],
    )


def timeouts_in_effect(connection, values: tuple) -> bool:
    """Whether ``connection``'s PostgreSQL session has these timeouts, set and committed by ``remember_timeouts``
    (kept on the driver's connection object: a new connection has none)."""
    return getattr(connection.connection, "_graphadmin_timeouts", None) == values


def remember_timeouts(connection, values: tuple) -> None:
    """Remember that the timeouts just set hold for this PostgreSQL session: at once outside a transaction, else
    once it commits (a rollback undoes ``set_config``, and the next request then sets them again)."""
    raw = connection.connection

    def remember():
        raw._graphadmin_timeouts = values

    if connection.in_atomic_block:
        transaction.on_commit(remember, using=connection.alias)
    else:
        remember()


def worker_connections_use_the_worker_timeout() -> None:
    """From now on every connection this process (and the pool it forks) opens gets WORKER_STATEMENT_TIMEOUT_MS."""
    connection_created.connect(_on_worker_connection, dispatch_uid="graphadmin-worker-statement-timeout")


def _on_worker_connection(sender, connection, **_kwargs):
    set_statement_timeout(settings.WORKER_STATEMENT_TIMEOUT_MS, connection)
