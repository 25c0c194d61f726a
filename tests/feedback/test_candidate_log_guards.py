"""The candidate log has no foreign keys (feedback migration 0019: their checks were a third of a context
call's log writing); a deferred trigger on each parent table (graph, injection, node, edge) refuses a
delete that would leave log rows naming a missing row, with the foreign-key error, and the ORM's
CASCADE and PROTECT rules are unchanged."""

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models import ProtectedError

from feedback.models import AgentSession, ContextInjection, InjectionCandidate
from graphadmin.models import Edge, Node
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare

pytestmark = pytest.mark.django_db

TABLES = ("graphadmin_graph", "feedback_contextinjection", "graphadmin_node", "graphadmin_edge")


def _logged(graph, node, edge=None, external_id="s"):
    """A log row naming ``node`` (and ``edge``), as a context call writes it."""
    session, _ = AgentSession.objects.get_or_create(graph=graph, external_id=external_id)
    injection = ContextInjection.objects.create(
        graph=graph, session=session, policy_revision=graph.current_policy(), query="q"
    )
    InjectionCandidate.objects.create(
        injection=injection, graph=graph, rank=1, selected=True, node=node, edge=edge, total=1.0
    )
    return injection


def _delete_by_sql(table, pk):
    """DELETE the row by raw SQL, its deferred checks run at once (as at commit); the error, if refused."""
    try:
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"DELETE FROM {table} WHERE id = %s", [pk])
            cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    except IntegrityError as error:
        return error
    finally:
        with connection.cursor() as cur:
            cur.execute("SET CONSTRAINTS ALL DEFERRED")
    return None


def _fresh_nodes(graph, *keys):
    return [Node.objects.create(graph=graph, key=k, title=k, text=k) for k in keys]


def test_the_log_has_no_foreign_keys_and_each_parent_a_guard():
    with connection.cursor() as cur:
        cur.execute(
            "SELECT count(*) FROM pg_constraint WHERE conrelid = 'feedback_injectioncandidate'::regclass"
            " AND contype = 'f'"
        )
        assert cur.fetchone()[0] == 0
        cur.execute(
            "SELECT tgrelid::regclass::text, tgdeferrable, tginitdeferred FROM pg_trigger"
            " WHERE tgname = 'feedback_candidate_log_guard' ORDER BY 1"
        )
        assert cur.fetchall() == [(t, True, True) for t in sorted(TABLES)]


def test_a_logged_node_cannot_be_deleted_by_sql_an_unlogged_one_can(acme_graph):
    logged, free = _fresh_nodes(acme_graph, "logged", "free")
    _logged(acme_graph, logged)
    error = _delete_by_sql("graphadmin_node", logged.pk)
    assert error is not None and error.__cause__.sqlstate == "23503"
    assert "candidate log" in str(error)
    assert Node.objects.filter(pk=logged.pk).exists()
    assert _delete_by_sql("graphadmin_node", free.pk) is None
    assert not Node.objects.filter(pk=free.pk).exists()


def test_a_logged_edge_and_injection_cannot_be_deleted_by_sql(acme_graph):
    source, target = _fresh_nodes(acme_graph, "s1", "t1")
    edge = Edge.objects.create(
        graph=acme_graph, source=source, target=target, edge_type=acme_graph.edge_types.get(name="related")
    )
    injection = _logged(acme_graph, target, edge)
    assert _delete_by_sql("graphadmin_edge", edge.pk).__cause__.sqlstate == "23503"
    assert _delete_by_sql("feedback_contextinjection", injection.pk).__cause__.sqlstate == "23503"
    assert Edge.objects.filter(pk=edge.pk).exists() and ContextInjection.objects.filter(pk=injection.pk).exists()


def test_the_orm_still_protects_a_logged_node(acme_graph):
    (node,) = _fresh_nodes(acme_graph, "protected")
    _logged(acme_graph, node)
    with pytest.raises(ProtectedError):
        node.delete()


def test_a_context_call_logs_rows_whose_parents_exist(rg):
    graph = rg["graph"]
    result = assemble_context(
        prepare(
            graph,
            RetrievalRequest(query="ranking weights", session="s-log", budget=3, start_nodes=[rg["nodes"]["a"].pk]),
        )
    )
    with connection.cursor() as cur:
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")  # every deferred check of the call passes
        cur.execute(
            "SELECT count(*), count(*) FILTER (WHERE j.id IS NULL OR g.id IS NULL OR n.id IS NULL"
            " OR (c.edge_id IS NOT NULL AND e.id IS NULL))"
            " FROM feedback_injectioncandidate c LEFT JOIN feedback_contextinjection j ON j.id = c.injection_id"
            " LEFT JOIN graphadmin_graph g ON g.id = c.graph_id LEFT JOIN graphadmin_node n ON n.id = c.node_id"
            " LEFT JOIN graphadmin_edge e ON e.id = c.edge_id WHERE c.injection_id = %s",
            [result.injection.pk],
        )
        rows, orphans = cur.fetchone()
    assert rows == result.considered > 0 and orphans == 0
