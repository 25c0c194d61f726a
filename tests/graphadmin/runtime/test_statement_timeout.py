"""Every web request runs under PostgreSQL's statement_timeout (STATEMENT_TIMEOUT_MS), a cancelled statement
is a 503 that writes nothing, and Celery workers get their own, longer timeout."""

import psycopg
import pytest
from django.db import connection

from graphadmin.celery import _worker_statement_timeout
from graphadmin.models import Node
from graphadmin.runtime.timeouts import _on_worker_connection


def _show(conn=None) -> str:
    with (conn or connection).cursor() as cur:
        cur.execute("SHOW statement_timeout")
        return cur.fetchone()[0]


def test_a_request_sets_the_timeout(api, acme_graph, alice, settings):
    settings.STATEMENT_TIMEOUT_MS = 1234
    assert api(alice).get(f"/api/graphs/{acme_graph.pk}/nodes/").status_code == 200
    assert _show() == "1234ms"  # the request's session setting, on this (the test's) connection


def test_healthz_does_not_touch_the_database(client, db, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert client.get("/healthz").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_statement_past_the_timeout_is_a_503(api, acme_graph, alice, settings):
    Node.objects.create(graph=acme_graph, key="a", title="A")
    settings.STATEMENT_TIMEOUT_MS = 300
    # Another session holds the nodes table: the request's SELECT waits on it until the timeout cancels it.
    with psycopg.connect(**connection.get_connection_params()) as blocker:
        blocker.execute(f"LOCK TABLE {Node._meta.db_table} IN ACCESS EXCLUSIVE MODE")
        response = api(alice).get(f"/api/graphs/{acme_graph.pk}/nodes/")
        blocker.rollback()
    assert response.status_code == 503, response.content
    assert "300 ms" in response.json()["detail"]


def test_workers_connections_get_the_worker_timeout(settings, db):
    settings.WORKER_STATEMENT_TIMEOUT_MS = 4321
    _worker_statement_timeout()  # what celery's worker_init runs
    from django.db.backends.signals import connection_created

    try:
        assert any("worker-statement-timeout" in str(receiver[0]) for receiver in connection_created.receivers)
        _on_worker_connection(sender=None, connection=connection)
        assert _show() == "4321ms"
    finally:
        connection_created.disconnect(dispatch_uid="graphadmin-worker-statement-timeout")


@pytest.mark.django_db(transaction=True)
def test_a_persistent_connection_is_sent_the_timeouts_once_and_again_after_a_rollback(api, acme_graph, alice, settings):
    settings.STATEMENT_TIMEOUT_MS = 1234
    settings.HOT_CACHE_SECONDS = 0  # every request queries (its graph), so each has a first statement
    client = api(alice)
    assert client.get(f"/api/graphs/{acme_graph.pk}/nodes/").status_code == 200  # committed: remembered
    connection.connection.execute("SET statement_timeout = '777ms'")  # behind the middleware's back
    assert client.get(f"/api/graphs/{acme_graph.pk}/nodes/").status_code == 200
    assert _show() == "777ms"  # not sent again: the connection had them already
    # A request that rolls back (a 400) takes its set_config with it: the next one sends the timeouts again.
    connection.connection._graphadmin_timeouts = None
    bad = client.post(f"/api/graphs/{acme_graph.pk}/nodes/", {"key": ""}, format="json")
    assert bad.status_code == 400
    assert _show() == "777ms"  # the rolled-back request's setting is gone
    assert client.get(f"/api/graphs/{acme_graph.pk}/nodes/").status_code == 200
    assert _show() == "1234ms"
    settings.STATEMENT_TIMEOUT_MS = 2345  # other values: sent again
    assert client.get(f"/api/graphs/{acme_graph.pk}/nodes/").status_code == 200
    assert _show() == "2345ms"
