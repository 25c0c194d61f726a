"""A context call's writes in few round trips (issue 27, the database side): the session made or found by
one statement (ranking.queries.agent_session), no savepoint, the node and edge counters in one statement."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from feedback.models import AgentSession
from graphadmin.models import EdgeStats, NodeStats
from graphadmin_client import RetrievalRequest
from ranking import queries as sql
from ranking.context import assemble_context
from ranking.retrieval import prepare

pytestmark = pytest.mark.django_db


def test_the_session_is_made_once_then_found_with_its_owner(acme_graph, alice, oscar):
    made = sql.agent_session(acme_graph.pk, "s-1", alice.pk)
    assert made[1:] == (alice.pk, True)
    assert sql.agent_session(acme_graph.pk, "s-1", oscar.pk) == (made[0], alice.pk, False)
    assert sql.agent_session(acme_graph.pk, "s-2", None)[1:] == (None, True)
    session = AgentSession.objects.get(pk=made[0])
    assert (session.graph_id, session.external_id, session.owner_id) == (acme_graph.pk, "s-1", alice.pk)


def test_a_context_call_writes_without_savepoints(rg):
    a = rg["nodes"]["a"]
    with CaptureQueriesContext(connection) as captured:
        result = assemble_context(
            prepare(rg["graph"], RetrievalRequest(query="ranking weights", session="s-w", start_nodes=[a.pk]))
        )
    statements = [q["sql"] for q in captured.captured_queries]
    assert not [s for s in statements if "SAVEPOINT" in s]
    assert len([s for s in statements if "feedback_agentsession" in s]) == 1
    assert len([s for s in statements if "graphadmin_nodestats" in s and "INSERT" in s]) == 1
    assert result.session_created and result.injection.session.external_id == "s-w"
    chosen = [item["node"] for item in result.selected]
    assert set(NodeStats.objects.filter(node_id__in=chosen).values_list("surfaced_count", flat=True)) == {1}
    edges = {e for item in result.selected for e in item["path"]}
    assert set(EdgeStats.objects.filter(edge_id__in=edges).values_list("traversed_count", flat=True)) <= {1}
    assert EdgeStats.objects.filter(edge_id__in=edges).count() == len(edges)
