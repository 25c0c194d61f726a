"""The SQL toolkit: every named statement of the service is composed and run through this module.

Where the ORM is left (docs/conventions.md, "How SQL is written" and "When to leave the ORM"), a statement is

- **named**: a module-level constant (or a function of a fixed choice, such as a weight column) in its app's
  queries (``feedback/queries/``, ``ranking/queries.py``), with a comment saying what it computes and why the
  ORM was not enough;
- **composed once**, when its module is imported, by ``statement(text, **parts)``: ``{name}`` in the text is a
  table from ``TABLES`` (``Model._meta.db_table`` as a quoted identifier) or a named part, either an identifier
  or column list composed here (``columns``, ``placeholders``) or a fragment of SQL text shared by several
  statements (its own ``{table}`` names filled in the same way); the result is the statement's text, a str, so
  nothing is composed again on a request and psycopg caches its parsing;
- **bound**: values are always parameters (``%(name)s``), never pasted into the text; ``psycopg.sql.Literal``
  is not used;
- **run** by ``fetch`` (its first row), ``fetch_all`` (all rows), ``execute`` (no rows) or ``rows`` (model
  instances), each on the request's Django connection (its transaction, its query log, ``execute_wrapper``);
  a statement run on every request may be prepared on its connection (``prepared=True``, ``prepared_cursor``:
  docs/decisions/0003-prepared-statements.md).

The advisory locks are taken here too (``advisory_lock``, ``try_advisory_lock``), by their class in
``graphadmin.runtime.locks.AdvisoryLock``, the one list of lock classes.

An app that has tables of its own extends ``TABLES`` (``TABLES | tables(session=AgentSession, ...)``) and passes
its mapping as ``statement(text, tables=...)``: the core knows no app's models (tests/test_layering.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import psycopg
from django.conf import settings
from django.db import connection
from psycopg import sql

from graphadmin.runtime.locks import AdvisoryLock

from .audit import AuditCheckpoint, AuditEvent
from .graph import Edge, EdgeStats, EdgeType, Graph, Node, NodeLexeme, NodeLexicon, NodeStats
from .outbox import OutboxTask
from .policy import PolicyRevision
from .tenancy import Membership, Organization


def table(model) -> sql.Identifier:
    """The model's table as a quoted identifier (``_meta.db_table``)."""
    return sql.Identifier(model._meta.db_table)


def tables(**models) -> dict[str, sql.Identifier]:
    """``{name: table}`` for each model given by name: what ``{name}`` in a statement's text becomes."""
    return {name: table(model) for name, model in models.items()}


# The core's tables, by the name a statement's text gives them.
TABLES = tables(
    organization=Organization,
    membership=Membership,
    graph=Graph,
    edge_type=EdgeType,
    node=Node,
    edge=Edge,
    node_stats=NodeStats,
    edge_stats=EdgeStats,
    node_lexeme=NodeLexeme,
    node_lexicon=NodeLexicon,
    policy=PolicyRevision,
    audit_event=AuditEvent,
    audit_checkpoint=AuditCheckpoint,
    outbox_task=OutboxTask,
)


def column(model, name: str) -> sql.Identifier:
    """The column of the model's field ``name`` as a quoted identifier (a foreign key's ``..._id``)."""
    return sql.Identifier(model._meta.get_field(name).column)


def columns(model, alias: str | None = None, *, fields: Iterable | None = None) -> sql.Composed:
    """The model's concrete columns (or those of ``fields``), in the model's order, each quoted (``alias.column``
    with an alias), comma-separated: a row read whole into ``rows``, or an INSERT's column list."""
    fields = model._meta.concrete_fields if fields is None else fields
    names = (sql.Identifier(alias, f.column) if alias else sql.Identifier(f.column) for f in fields)
    return sql.SQL(", ").join(names)


def placeholders(names: Iterable[str]) -> sql.Composed:
    """``%(name)s, ...`` for the names, comma-separated: an INSERT's values, bound by name."""
    return sql.SQL(", ").join(sql.Placeholder(name) for name in names)


def statement(text: str, *, tables: Mapping[str, sql.Composable] = TABLES, **parts: str | sql.Composable) -> str:
    """The text of one named statement: ``text`` with each ``{name}`` filled in, composed once.

    A name is a table of ``tables`` (the core's ``TABLES`` unless an app passes its own, extended mapping) or
    one of ``parts``: an identifier or composed SQL (``column``, ``columns``, ``placeholders``) goes in as it
    is; a str is a fragment of SQL text shared by several statements, whose own ``{name}``s are filled from the
    same tables and the non-text parts. Values never go in here: they are bound (``%(name)s``) when it runs.
    """
    composed = {name: part for name, part in parts.items() if not isinstance(part, str)}
    fragments = {
        name: sql.SQL(part).format(**tables, **composed) for name, part in parts.items() if isinstance(part, str)
    }
    return sql.SQL(text).format(**tables, **composed, **fragments).as_string()


class _PreparedCursor(psycopg.Cursor):
    """A cursor binding values on the server, each statement prepared on its connection at its first run:
    PostgreSQL then plans it again only while a plan for the values beats the one plan for any values
    (its ``plan_cache_mode = auto``), where Django's cursors send every value inlined and plan every time."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        return super().execute(query, params, prepare=True, binary=binary)

    def _convert_query(self, query, params=None):
        # Kept as an unprepared run keeps it: Django's query log (DEBUG, CaptureQueriesContext) reads its text.
        self._query = super()._convert_query(query, params)
        return self._query


def prepared_cursor():
    """A cursor for a statement run on every request: prepared (``_PreparedCursor``) on the request's
    connection, or Django's cursor when DATABASE_PREPARED_STATEMENTS is off. Both go through Django's
    wrapper (its query log, ``execute_wrapper``, the broken-transaction check)."""
    if not settings.DATABASE_PREPARED_STATEMENTS:
        return connection.cursor()
    connection.ensure_connection()
    return connection._prepare_cursor(_PreparedCursor(connection.connection))


def _cursor(prepared: bool):
    return prepared_cursor() if prepared else connection.cursor()


def fetch(statement: str, params: Mapping | None = None, *, prepared: bool = False) -> tuple | None:
    """Run one statement; its first row (None: no row)."""
    with _cursor(prepared) as cur:
        cur.execute(statement, params)
        return cur.fetchone()


def fetch_all(statement: str, params: Mapping | None = None, *, prepared: bool = False) -> list[tuple]:
    """Run one statement; all its rows."""
    with _cursor(prepared) as cur:
        cur.execute(statement, params)
        return cur.fetchall()


def execute(statement: str, params: Mapping | None = None) -> None:
    """Run one statement whose rows, if any, are not read."""
    with connection.cursor() as cur:
        cur.execute(statement, params)


def rows(model, statement: str, params: Mapping | None = None) -> list:
    """Model instances of the rows ``statement`` returns: every concrete column, in the model's order
    (``columns(model, alias)``), as the ORM would load them (``Model.from_db``), without its query building."""
    names = [f.attname for f in model._meta.concrete_fields]
    return [model.from_db(connection.alias, names, list(values)) for values in fetch_all(statement, params)]


# Advisory locks, transaction-scoped, on two int4 keys: the class (AdvisoryLock) and the id of what it guards.
ADVISORY_LOCK = "SELECT pg_advisory_xact_lock(%(lock)s, %(key)s)"
TRY_ADVISORY_LOCK = "SELECT pg_try_advisory_xact_lock(%(lock)s, %(key)s)"


def advisory_lock(lock: AdvisoryLock, key: int) -> None:
    """Take the advisory lock ``(lock, key)`` for the rest of the transaction, waiting for its holder if any.

    A statement of its own, never a part of the read that follows it: under READ COMMITTED a statement's
    snapshot is taken when it starts, so a read in the same statement could miss the writer it waited for."""
    execute(ADVISORY_LOCK, {"lock": int(lock), "key": key})


def try_advisory_lock(lock: AdvisoryLock, key: int) -> bool:
    """Whether this transaction now holds the advisory lock ``(lock, key)``: true or false at once, no wait."""
    return fetch(TRY_ADVISORY_LOCK, {"lock": int(lock), "key": key})[0]
