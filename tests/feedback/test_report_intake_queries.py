"""The report intake's statements (feedback.reports): the session with its pending outcome in one query, the
items resolved by named statements, the outbox row in one INSERT; the row stored is the report as given."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from feedback import reports
from feedback.models import AgentSession, PendingReport
from feedback.report import Report
from graphadmin.errors import InputError
from graphadmin.tenancy import graph_access

from .conftest import make_session

pytestmark = pytest.mark.django_db


def _intake(fn, user, graph, external_id, data, key=""):
    graph = graph_access(user, graph.pk, "report").graph  # as the views find it: with the caller's role
    with CaptureQueriesContext(connection) as queries:
        body = fn(user, graph, external_id, data, key)
    return body, [q["sql"] for q in queries.captured_queries]


def test_use_report_is_three_statements(ada, acme_graph, surfaced, edges, small_graph):
    data = {"items": [{"node": small_graph["c"].pk, "signal": "explicit"}], "learning_rate": None}
    body, statements = _intake(reports.report_uses, ada, acme_graph, "s1", data, "retry-1")
    assert body["status"] == "queued" and body["idempotency_key"] == f"uses:{surfaced.pk}:client:retry-1"
    # the session with its pending outcome and what it surfaced, the nodes, the outbox row
    assert len(statements) == 3, [s[:90] for s in statements]
    row = PendingReport.objects.get()
    assert (row.graph_id, row.session_id, row.kind, row.user_id, row.state) == (
        acme_graph.pk,
        surfaced.pk,
        "uses",
        ada.pk,
        "pending",
    )
    assert (row.attempts, row.last_error, row.result, row.applied_at) == (0, "", {}, None)
    assert row.not_before == row.created_at
    assert Report.from_row(row) == Report(
        "uses", body["idempotency_key"], reports.resolve_use_items(acme_graph, data["items"])
    )


def test_same_key_stores_one_row(ada, acme_graph, surfaced, small_graph):
    data = {"items": [{"node": small_graph["c"].pk, "signal": "explicit"}]}
    for _ in range(2):
        reports.report_uses(ada, acme_graph, "s1", data, "retry-2")
    assert PendingReport.objects.count() == 1


def test_edges_by_id_and_by_triplet_in_one_statement(acme_graph, surfaced, edges, small_graph):
    n = small_graph
    items = [
        {"edge": edges["bc"].pk, "signal": "explicit"},
        {"edge": {"source": n["a"].pk, "target": n["b"].pk, "type": "related"}, "signal": "negative"},
    ]
    with CaptureQueriesContext(connection) as queries:
        resolved = reports.resolve_use_items(acme_graph, items)
    assert len(queries.captured_queries) == 1
    assert [(i.kind, i.id, i.signal) for i in resolved] == [
        ("edge", edges["bc"].pk, "explicit"),
        ("edge", edges["ab"].pk, "negative"),
    ]


def test_archived_or_unknown_items_are_named(acme_graph, surfaced, edges, small_graph):
    n = small_graph
    edges["ab"].archived = True
    edges["ab"].save(update_fields=["archived"])
    with pytest.raises(InputError) as caught:
        reports.resolve_use_items(
            acme_graph,
            [
                {"node": n["c"].pk, "signal": "explicit"},
                {"edge": {"source": n["a"].pk, "target": n["b"].pk, "type": "related"}, "signal": "explicit"},
            ],
        )
    assert list(caught.value.errors["items"]) == [1]
    with pytest.raises(InputError) as caught:
        reports.resolve_use_items(acme_graph, [{"edge": {"source": n["b"].pk, "target": n["c"].pk, "type": "nope"}}])
    assert list(caught.value.errors["items"]) == [0]


def test_outcome_is_two_statements(ada, acme_graph, surfaced):
    body, statements = _intake(reports.report_outcome, ada, acme_graph, "s1", {"outcome": "accepted"})
    assert body["status"] == "queued"
    # the session with its pending outcome and whether it surfaced anything, the outbox row
    assert len(statements) == 2, statements
    again, statements = _intake(reports.report_outcome, ada, acme_graph, "s1", {"outcome": "accepted"})
    # the pending outcome stands: its key, nothing stored
    assert again == {"status": "queued", "task_id": None, "idempotency_key": body["idempotency_key"]}
    assert len(statements) == 1 and PendingReport.objects.count() == 1


def test_response_report_is_two_statements(ada, acme_graph, surfaced):
    body, statements = _intake(reports.report_response, ada, acme_graph, "s1", {"response": "B then C"})
    assert body["status"] == "queued" and len(statements) == 2, statements


def test_a_session_with_nothing_selected(ada, acme_graph, small_graph):
    make_session(acme_graph, "cut", [(small_graph["a"], None, False)], ada)
    AgentSession.objects.create(graph=acme_graph, external_id="bare", owner=ada)
    used = {"items": [{"node": small_graph["a"].pk, "signal": "explicit"}]}
    with pytest.raises(InputError):  # cut by the budget, never given to the agent: no use of it counts
        _intake(reports.report_uses, ada, acme_graph, "cut", used)
    body, _ = _intake(reports.report_outcome, ada, acme_graph, "cut", {"outcome": "accepted"})
    assert body == {"status": "nothing_surfaced", "reason": body["reason"]}
    body, _ = _intake(reports.report_outcome, ada, acme_graph, "bare", {"outcome": "accepted"})
    assert body["status"] == "no_injection"
