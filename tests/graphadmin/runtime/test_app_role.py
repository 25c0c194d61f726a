"""The application's database role (graphadmin.runtime.db_roles): rows only, the ledgers insert-only, no DDL.

The suite itself runs as the owner; these tests connect as the application role the way ``make run``'s
processes do (``DATABASE_ROLE=app``, rundemo's ``child_env``) and try what a subverted application could.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psycopg
import pytest
from django.conf import settings
from django.db import connection
from psycopg import errors

from feedback.management.commands.rundemo import child_env
from graphadmin import audit
from graphadmin.runtime.db_roles import grant_app_role
from tests.conftest import ROOT, stop

ROLE = settings.DATABASE_APP_ROLE


def _connect_as_app():
    params = connection.settings_dict
    return psycopg.connect(
        host=params["HOST"], port=params["PORT"] or None, dbname=params["NAME"], user=ROLE, autocommit=True
    )


@pytest.fixture
def app_db(transactional_db):
    with _connect_as_app() as conn:
        yield conn


def _refused(conn, statement, params=()):
    with pytest.raises(errors.InsufficientPrivilege) as refused:
        conn.execute(statement, params)
    return str(refused.value)


def test_the_role_is_no_superuser_and_owns_nothing(app_db):
    assert app_db.execute("SELECT current_user").fetchone() == (ROLE,)
    row = app_db.execute(
        "SELECT rolsuper, rolcreatedb, rolcreaterole, rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()
    assert row == (False, False, False, False)
    owned = app_db.execute(
        "SELECT count(*) FROM pg_class WHERE relowner = (SELECT oid FROM pg_roles WHERE rolname = %s)", [ROLE]
    )
    assert owned.fetchone() == (0,)


def test_the_audit_chain_cannot_be_truncated_updated_or_deleted(app_db, acme, alice):
    audit.append(acme, alice, "test.event", {"i": 1})
    for statement in (
        "TRUNCATE graphadmin_auditevent",
        "UPDATE graphadmin_auditevent SET payload = '{}'",
        "DELETE FROM graphadmin_auditevent",
        "TRUNCATE feedback_weightchange",
        "UPDATE feedback_weightchange SET after = 1",
        "DELETE FROM feedback_weightchangeblock",
        "DELETE FROM graphadmin_auditcheckpoint",
        "DELETE FROM django_migrations",
    ):
        assert "permission denied" in _refused(app_db, statement), statement
    assert audit.verify(acme).ok


def test_no_ddl_no_trigger_switch(app_db):
    for statement in (
        "ALTER TABLE graphadmin_auditevent DISABLE TRIGGER ALL",
        "ALTER TABLE graphadmin_auditevent DISABLE TRIGGER graphadmin_auditevent_append_only",
        "ALTER TABLE graphadmin_node ADD COLUMN evil int",
        "DROP TRIGGER graphadmin_auditevent_append_only ON graphadmin_auditevent",
        "DROP TABLE graphadmin_auditevent",
        "CREATE TABLE evil (id int)",
        "SET session_replication_role = replica",
    ):
        with pytest.raises((errors.InsufficientPrivilege, errors.InsufficientPrivilege)) as refused:
            app_db.execute(statement)
        assert "must be" in str(refused.value) or "permission denied" in str(refused.value), statement


def test_rows_are_read_and_written(app_db, acme, alice, acme_graph):
    assert app_db.execute("SELECT slug FROM graphadmin_graph WHERE id = %s", [acme_graph.pk]).fetchone() == ("memory",)
    app_db.execute("UPDATE graphadmin_graph SET description = 'changed' WHERE id = %s", [acme_graph.pk])
    app_db.execute(
        "INSERT INTO graphadmin_auditevent (organization_id, seq, created_at, actor, action, scope, payload, "
        "prev_hash, hash) VALUES (%s, 999, now(), 'x', 'x', '{}', '{}', '', '')",
        [acme.pk],
    )
    assert app_db.execute("SELECT count(*) FROM graphadmin_auditevent WHERE seq = 999").fetchone() == (1,)
    app_db.execute("DELETE FROM django_session")


def test_the_product_works_as_the_app_role(transactional_db, acme, alice, small_graph, acme_graph):
    """The write paths, verify with its checkpoint and the history's partition maintenance, in a process
    connected as the application role (``DATABASE_ROLE=app``)."""
    script = f"""
from django.db import connection
from feedback import retention, tasks
from feedback.actions import do_set_weights
from feedback.rules import ManualValue
from graphadmin import actions, audit
from graphadmin.models import Edge, Graph, Organization
with connection.cursor() as cur:
    cur.execute("SELECT current_user")
    print("user", cur.fetchone()[0])
graph = Graph.objects.get(pk={acme_graph.pk})
actions.do_update_graph(graph, {{"feedback_enabled": False}}, actor="command:test")
actions.do_update_graph(graph, {{"feedback_enabled": True}}, actor="command:test")
edge = Edge.objects.filter(graph=graph).first()
print("batch", do_set_weights(graph, [ManualValue("edge", edge.pk, "weight", 0.8)], actor="command:test").status)
print("anchor", audit.anchor_heads()["acme"].ok)
print("maintain", sorted(tasks.maintain_history_task()))
print("created", retention.ensure_partitions(months_ahead=5))
try:
    connection.cursor().execute("SELECT feedback_history_drop_partition('feedback_weightchange', "
                                          "date_trunc('month', now())::date)")
except Exception as exc:
    print("refused", str(exc).splitlines()[0])
"""
    env = {**os.environ, "DATABASE_ROLE": "app", "DATABASE_NAME": connection.settings_dict["NAME"]}
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert f"user {ROLE}" in out and "batch applied" in out and "anchor True" in out
    assert "refused weight history of" in out and "only months that are over may be expired" in out
    created = out.split("created ")[1].splitlines()[0]
    assert "feedback_weightchange_" in created  # month 4 and 5 ahead, made through the owner's function
    assert audit.verify(acme).ok


def test_grants_are_idempotent_and_ledgers_are_insert_only(db):
    first = grant_app_role(connection, ROLE)
    assert grant_app_role(connection, ROLE) == first
    assert first["graphadmin_auditevent"] == "SELECT, INSERT"
    assert first["feedback_weightchange"] == "SELECT, INSERT"
    assert first["feedback_weightchangeblock"] == "SELECT, INSERT"
    assert first["graphadmin_auditcheckpoint"] == "SELECT, INSERT, UPDATE"  # forward-only upsert
    assert first["graphadmin_node"] == "SELECT, INSERT, UPDATE, DELETE"
    assert first["feedback_updatebatch"] == "SELECT, INSERT, UPDATE, DELETE"
    assert first["django_migrations"] == "SELECT"
    assert not any(name.startswith("feedback_weightchange_2") for name in first)  # partitions: via the parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _app_connections(database: str) -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename = %s", [database, ROLE])
        return cur.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_rundemo_serves_as_the_app_role(tmp_path):
    """The web server ``make run`` starts, with the environment rundemo gives it, connects as the app role."""
    database = connection.settings_dict["NAME"]
    assert child_env({"PATH": "/bin"})["DATABASE_ROLE"] == "app"
    assert "DATABASE_MIGRATE_URL" not in child_env({"DATABASE_URL": "postgres://a@h/d", "DATABASE_MIGRATE_URL": "x"})
    port = _free_port()
    env = {
        **child_env(),
        "DATABASE_NAME": database,
        "WEB_CONCURRENCY": "1",
        "ALLOWED_HOSTS": "127.0.0.1",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "test-only-insecure-key"),
    }
    before = _app_connections(database)
    log = open(tmp_path / "gunicorn.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "python:graphadmin.gunicorn_conf", "--bind", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=10).close()
                break
            except urllib.error.HTTPError:
                break  # 503 (no worker here): the database was asked all the same
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.3)
        # CONN_MAX_AGE=60 (rundemo's): the request's connection stays open, under the app role's name.
        assert _app_connections(database) > before
    finally:
        stop(proc)
        log.close()


def test_migrate_uses_the_owner_connection_when_one_is_configured():
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "from django.core.management import load_command_class; "
        "p = load_command_class('graphadmin', 'migrate').create_parser('manage.py', 'migrate'); "
        "print(settings.MIGRATE_DATABASE, settings.DATABASE_APP_ROLE, p.parse_args([]).database, "
        "settings.DATABASES['owner']['USER'], settings.DATABASES['default']['USER'])"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "graphadmin.settings",
        "DATABASE_URL": "postgres://webapp:pw@db.internal:5432/graphadmin",
        "DATABASE_MIGRATE_URL": "postgres://owner:pw@db.internal:5432/graphadmin",
    }
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["owner", "webapp", "owner", "owner", "webapp"]
