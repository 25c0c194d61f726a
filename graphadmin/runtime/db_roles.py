"""The application's database role: rows only, never the schema, and the ledgers insert-only.

Migrations run as the owner of the tables; the web server, the worker, beat and the MCP server run as
the application role (``settings.DATABASE_APP_ROLE``), which owns nothing. Owning a table is what lets
a role ALTER it, disable its triggers or TRUNCATE it, so the role that serves requests cannot touch the
append-only rules even if its SQL were subverted. After every ``migrate`` (a post_migrate receiver,
``graphadmin.apps``) ``grant_app_role`` sets the role's privileges afresh, idempotently:

- every table and view: SELECT, INSERT, UPDATE, DELETE;
- a ledger, i.e. a table whose TRUNCATE is refused (``graphadmin_refuse_truncate``: the audit chain,
  its checkpoints, both weight-history tables): SELECT and INSERT only, plus UPDATE where a trigger keeps
  rows moving forward only (``graphadmin_checkpoint_forward_only``: the checkpoint's upsert);
- ``django_migrations``: SELECT only; partitions: nothing (the role reaches them through their parent);
- sequences: USAGE; the owner's ``SECURITY DEFINER`` functions (the history's partition maintenance,
  feedback migration 0013): EXECUTE. No TRUNCATE, REFERENCES or TRIGGER anywhere, no CREATE on the schema.

With the embedded server the role is created here (LOGIN, no other attribute); with an external server
the database administrator creates it (docs/deploy.md) and this only grants.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.db import IntegrityError, ProgrammingError, connections, transaction
from psycopg import sql

log = logging.getLogger(__name__)

# Tables of the schema with the name of the trigger functions that mark them (one row per table).
TABLES_SQL = """
SELECT c.relname,
       EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
               WHERE t.tgrelid = c.oid AND p.proname = 'graphadmin_refuse_truncate') AS ledger,
       EXISTS (SELECT 1 FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
               WHERE t.tgrelid = c.oid AND p.proname = 'graphadmin_checkpoint_forward_only') AS forward_only
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm') AND NOT c.relispartition
ORDER BY c.relname
"""

# The owner's SECURITY DEFINER functions of the schema, as regprocedure text (name and argument types).
FUNCTIONS_SQL = """
SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = current_schema() AND p.prosecdef
ORDER BY 1
"""

ROW_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"


def privileges_for(table: str, ledger: bool, forward_only: bool) -> str:
    """The privileges the application role gets on one table (see the module docstring)."""
    if table == "django_migrations":
        return "SELECT"
    if ledger:
        return "SELECT, INSERT, UPDATE" if forward_only else "SELECT, INSERT"
    return ROW_PRIVILEGES


def role_exists(cursor, role: str) -> bool:
    cursor.execute("SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = %s)", [role])
    return cursor.fetchone()[0]


def grant_app_role(connection, role: str, *, create: bool = False) -> dict[str, str]:
    """Give ``role`` exactly the application's privileges on the schema ``connection`` migrated.

    ``create``: create the role first when it does not exist (the embedded server, where the owner is
    a superuser). Returns the privileges per table. Run as the owner; idempotent.
    """
    name = sql.Identifier(role)
    granted = {}
    with connection.cursor() as cur:
        if not role_exists(cur, role):
            if not create:
                log.warning("database role %s does not exist; no privileges granted (docs/deploy.md)", role)
                return granted
            # Roles belong to the whole server: another database's migrate (a parallel test process) may create
            # it at the same moment, and the loser's CREATE fails on the catalog's unique name. Either way it exists.
            try:
                with transaction.atomic(using=connection.alias):
                    cur.execute(
                        sql.SQL(
                            "CREATE ROLE {role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS"
                        ).format(role=name)
                    )
            except (IntegrityError, ProgrammingError):
                if not role_exists(cur, role):
                    raise
        cur.execute("SELECT current_database(), current_schema()")
        database, schema = cur.fetchone()
        cur.execute(
            sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {db} TO {role}").format(
                db=sql.Identifier(database), role=name
            )
        )
        cur.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {schema} TO {role}").format(schema=sql.Identifier(schema), role=name)
        )
        cur.execute(
            sql.SQL("REVOKE CREATE ON SCHEMA {schema} FROM {role}").format(schema=sql.Identifier(schema), role=name)
        )
        cur.execute(TABLES_SQL)
        for table, ledger, forward_only in cur.fetchall():
            privileges = privileges_for(table, ledger, forward_only)
            ident = sql.Identifier(table)
            # Reset, then grant: a table that became a ledger loses the UPDATE and DELETE it had.
            cur.execute(sql.SQL("REVOKE ALL ON TABLE {table} FROM {role}").format(table=ident, role=name))
            cur.execute(
                sql.SQL("GRANT {privileges} ON TABLE {table} TO {role}").format(
                    privileges=sql.SQL(privileges), table=ident, role=name
                )
            )
            granted[table] = privileges
        cur.execute(
            sql.SQL("GRANT USAGE ON ALL SEQUENCES IN SCHEMA {schema} TO {role}").format(
                schema=sql.Identifier(schema), role=name
            )
        )
        cur.execute(FUNCTIONS_SQL)
        for (function,) in cur.fetchall():
            # The catalog's own spelling of the function (quoted name and argument types), not an input.
            cur.execute(sql.SQL("GRANT EXECUTE ON FUNCTION {fn} TO {role}").format(fn=sql.SQL(function), role=name))
    return granted


def grant_after_migrate(sender, using, plan=None, **kwargs) -> None:
    """post_migrate receiver: after a ``migrate`` (not a test flush, which sends no plan), grant the
    application role its privileges, on the connection that migrated (the owner's)."""
    role = getattr(settings, "DATABASE_APP_ROLE", "")
    if plan is None or not role:
        return
    connection = connections[using]
    if connection.settings_dict.get("USER") == role:
        return  # migrating as the application role itself: nothing it could grant
    grant_app_role(connection, role, create=getattr(settings, "DATABASE_CREATE_APP_ROLE", False))
