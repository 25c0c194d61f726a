"""The typed report pipeline (issue 27 item 5): one Report from intake to the action, a batch's audit
events chained together, one wake-up per running drain, and the old tasks through the same action."""

import pytest
from django.db import connection

from feedback import ledger, outbox, reports
from feedback.models import PendingReport, UpdateBatch
from feedback.queries import reports as report_queries
from feedback.report import Report, UnknownItem, stale_items
from feedback.rules import UseItem
from feedback.tasks import apply_uses_task
from graphadmin import audit
from graphadmin.errors import InputError
from graphadmin.models import AuditEvent, Node
from graphadmin.runtime.locks import AdvisoryLock

from .conftest import make_session, raw_connection, url

pytestmark = pytest.mark.django_db


def _post(api, user, graph, external_id, what, body):
    response = api(user).post(url(graph, external_id, what), body, format="json")
    assert response.status_code == 202 and response.data["status"] == "queued", response.data
    return response.data


def test_a_report_reads_back_from_its_payload_unchanged():
    uses = Report("uses", "k1", (UseItem("node", 3, "explicit"), UseItem("edge", 4, "negative", 9)), learning_rate=0.2)
    assert Report.from_payload("uses", "k1", uses.payload()) == uses
    outcome = Report("outcome", "k2", outcome="accepted", alpha=0.3)
    assert Report.from_payload("outcome", "k2", outcome.payload()) == outcome
    # A row written by the previous version (no source, no injection ids) reads back as an API report.
    old = Report.from_payload("uses", "k3", {"items": [{"kind": "node", "id": 5, "signal": "implicit"}]})
    assert old.items == (UseItem("node", 5, "implicit"),) and old.source == "api" and old.learning_rate is None


def test_an_archived_item_is_named_in_the_intakes_words():
    reports_ = [
        Report("uses", "a", (UseItem("node", 1, "explicit"),)),
        Report("uses", "b", (UseItem("edge", 7, "explicit"),)),
    ]
    stale = stale_items(reports_, live_nodes={1}, live_edges=set())
    assert list(stale) == [1]
    error = stale[1]
    assert isinstance(error, InputError) and isinstance(error, UnknownItem)
    assert error.field == "items[0].edge" and error.errors == {
        "items": {0: {"edge": ["Unknown edge 7 in this graph."]}}
    }


def test_a_drained_batch_chains_one_audit_event_per_report(api, ada, acme_graph, small_graph):
    n = small_graph
    for name in ("p1", "p2", "p3"):
        make_session(acme_graph, name, [(n["b"], None, True), (n["c"], None, True)], ada)
        _post(api, ada, acme_graph, name, "uses", {"items": [{"node": n["b"].pk}]})
    before = AuditEvent.objects.filter(organization_id=acme_graph.organization_id).count()
    counts = outbox.drain(acme_graph.pk)
    assert counts["applied"] == 3 and counts["batches"] == 1
    batches = list(UpdateBatch.objects.filter(graph=acme_graph, kind="reinforce").order_by("id"))
    events = list(
        AuditEvent.objects.filter(organization_id=acme_graph.organization_id, action="graph.feedback").order_by("seq")
    )
    assert [e.payload["batch"] for e in events] == [b.pk for b in batches]
    assert AuditEvent.objects.filter(organization_id=acme_graph.organization_id).count() == before + 3
    verification = audit.verify(acme_graph.organization)
    assert verification.ok, verification


def test_a_report_that_fails_drops_its_audit_events_and_the_rest_apply(api, ada, acme_graph, small_graph, monkeypatch):
    n = small_graph
    for name in ("f1", "f2", "f3"):
        make_session(acme_graph, name, [(n["b"], None, True)], ada)
        _post(api, ada, acme_graph, name, "uses", {"items": [{"node": n["b"].pk}]})
    real = ledger.audit_batch

    def second_fails_after_its_audit_event(batch, actor, audit_extra=None):
        result = real(batch, actor, audit_extra)  # the event is collected, then the report fails in its savepoint
        if audit_extra and audit_extra.get("session") == "f2":
            raise RuntimeError("lost after its writes")
        return result

    monkeypatch.setattr(ledger, "audit_batch", second_fails_after_its_audit_event)
    counts = outbox.drain(acme_graph.pk)
    assert (counts["applied"], counts["pending"]) == (2, 1)
    applied = UpdateBatch.objects.filter(graph=acme_graph, kind="reinforce")
    assert applied.count() == 2  # f2's batch rolled back with its savepoint
    events = AuditEvent.objects.filter(organization_id=acme_graph.organization_id, action="graph.feedback")
    assert sorted(e.payload["batch"] for e in events) == sorted(applied.values_list("pk", flat=True))
    assert audit.verify(acme_graph.organization).ok
    assert PendingReport.objects.get(session__external_id="f2").state == "pending"


@pytest.mark.django_db(transaction=True)
def test_no_wake_up_while_a_drainer_holds_the_graph_and_that_drainer_sees_the_report(
    api, ada, acme_graph, surfaced, edges, monkeypatch
):
    sent = []
    monkeypatch.setattr(reports.task_outbox, "publish", lambda name, **kw: sent.append((name, kw)) or True)
    drainer = raw_connection()
    try:
        drainer.execute("BEGIN")
        (held,) = drainer.execute(
            "SELECT pg_try_advisory_xact_lock(%s, %s)", [int(AdvisoryLock.DRAIN), acme_graph.pk]
        ).fetchone()
        assert held and report_queries.drain_running(acme_graph.pk)
        _post(api, ada, acme_graph, "s1", "uses", {"items": [{"edge": edges["ab"].pk}]})
        assert sent == []  # committed while the drain ran: it is that drain's to apply
        # This process's own drain finds the graph busy, as a poke would.
        assert outbox.drain(acme_graph.pk)["busy"]
    finally:
        drainer.execute("COMMIT")
        drainer.close()
    assert not report_queries.drain_running(acme_graph.pk)
    assert outbox.drain(acme_graph.pk)["applied"] == 1
    # No drainer running: the report is poked as before.
    _post(api, ada, acme_graph, "s1", "uses", {"items": [{"node": Node.objects.get(pk=edges["ab"].target_id).pk}]})
    assert [name for name, _kw in sent] == ["feedback.drain_reports"]
    connection.close()


def test_an_old_versions_message_is_applied_by_the_same_action(acme_graph, surfaced, edges):
    result = apply_uses_task.apply(
        kwargs={
            "graph_id": acme_graph.pk,
            "external_id": "s1",
            "items": [{"kind": "edge", "id": edges["ab"].pk, "signal": "explicit"}],
            "idempotency_key": "old-1",
        }
    ).get()
    assert result["status"] == "applied"
    again = apply_uses_task.apply(
        kwargs={
            "graph_id": acme_graph.pk,
            "external_id": "s1",
            "items": [{"kind": "edge", "id": edges["ab"].pk, "signal": "explicit"}],
            "idempotency_key": "old-1",
        }
    ).get()
    assert again["status"] == "duplicate" and again["batch_id"] == result["batch_id"]
