"""The report outbox: a 202 is a row written in the request's transaction, drained in order, once, or refused.

These tests post through the API without running the on-commit poke (no worker): the outbox rows are
then drained in this process by ``feedback.outbox.drain``, as the worker's task does.
"""

from datetime import timedelta

import pytest
from django.db import transaction

from feedback import outbox
from feedback.models import PendingReport, UpdateBatch, UseEvent
from graphadmin import clock
from tests.conftest import queued_work

from .conftest import make_session, reload, url

pytestmark = pytest.mark.django_db


class Boom(Exception):
    pass


def _post(api, user, graph, external_id, what, body, **headers):
    response = api(user).post(url(graph, external_id, what), body, format="json", **headers)
    assert response.status_code == 202 and response.data["status"] == "queued", response.data
    return response.data


def test_the_report_is_stored_in_the_request_transaction(
    api, ada, acme_graph, surfaced, edges, django_capture_on_commit_callbacks
):
    # Accepted: the row is there at the 202, pending, with what the worker needs; one poke on commit.
    with django_capture_on_commit_callbacks() as callbacks:
        body = _post(api, ada, acme_graph, "s1", "uses", {"items": [{"edge": edges["ab"].pk}]})
    row = PendingReport.objects.get()
    assert (row.state, row.kind, row.graph_id) == ("pending", "uses", acme_graph.pk)
    assert (row.session, row.user) == (surfaced, ada)
    assert row.idempotency_key == body["idempotency_key"] and body["task_id"]
    assert row.payload["items"] == [{"kind": "edge", "id": edges["ab"].pk, "signal": "explicit"}]
    assert len(queued_work(callbacks)) == 1
    # A request whose transaction rolls back leaves no row, and sends no poke.
    with django_capture_on_commit_callbacks() as callbacks, pytest.raises(Boom), transaction.atomic():
        _post(api, ada, acme_graph, "s1", "outcome", {"outcome": "accepted"})
        assert PendingReport.objects.count() == 2
        raise Boom
    assert PendingReport.objects.count() == 1 and not queued_work(callbacks)


def test_a_drained_batch_applies_uses_before_the_outcome_of_the_same_session(
    api, ada, acme_graph, small_graph, surfaced, edges
):
    c = small_graph["c"]
    _post(api, ada, acme_graph, "s1", "uses", {"items": [{"node": c.pk}]})
    _post(api, ada, acme_graph, "s1", "outcome", {"outcome": "accepted"})
    counts = outbox.drain(acme_graph.pk)
    assert counts["applied"] == 2 and counts["batches"] == 1
    uses, outcome = PendingReport.objects.order_by("id")
    assert uses.result["status"] == outcome.result["status"] == "applied"
    assert uses.result["batch_id"] < outcome.result["batch_id"]
    # Reinforced first (0.5 -> 0.55), then the outcome EMA on that: 0.1 * 1.0 + 0.9 * 0.55.
    assert reload(c).feedback_weight == pytest.approx(0.595)


def test_an_outcome_waits_behind_a_use_report_in_backoff(api, ada, acme_graph, small_graph, surfaced, edges):
    c = small_graph["c"]
    _post(api, ada, acme_graph, "s1", "uses", {"items": [{"node": c.pk}]})
    _post(api, ada, acme_graph, "s1", "outcome", {"outcome": "accepted"})
    later = make_session(acme_graph, "s2", [(c, edges["bc"], True)], owner=ada)
    _post(api, ada, acme_graph, "s2", "outcome", {"outcome": "rejected"})
    uses = PendingReport.objects.order_by("id").first()
    # The use report failed once and waits out its backoff: its session's outcome must not overtake it.
    PendingReport.objects.filter(pk=uses.pk).update(attempts=1, not_before=clock.now() + timedelta(minutes=5))
    counts = outbox.drain(acme_graph.pk)
    assert counts["applied"] == 1  # only the other session's outcome
    assert list(PendingReport.objects.order_by("id").values_list("state", flat=True)) == [
        "pending",
        "pending",
        "applied",
    ]
    assert not UpdateBatch.objects.filter(trigger_session=surfaced).exists()
    assert UpdateBatch.objects.get().trigger_session == later
    # Past the backoff, both apply, uses first.
    PendingReport.objects.filter(pk=uses.pk).update(not_before=clock.now())
    assert outbox.stale_graphs(stale_seconds=3600) == [acme_graph.pk]
    assert outbox.drain(acme_graph.pk)["applied"] == 2
    first, second = UpdateBatch.objects.filter(trigger_session=surfaced).order_by("id")
    assert (first.kind, second.kind) == ("reinforce", "outcome")


def test_a_duplicate_by_idempotency_key_applies_once(api, ada, acme_graph, surfaced, edges):
    for _ in range(2):
        body = _post(
            api, ada, acme_graph, "s1", "uses", {"items": [{"edge": edges["ab"].pk}]}, HTTP_IDEMPOTENCY_KEY="retry-7"
        )
    row = PendingReport.objects.get()
    assert row.idempotency_key == body["idempotency_key"]
    assert outbox.drain(acme_graph.pk)["applied"] == 1
    # The same row delivered again (a drain that died after applying, before marking it): the batch's
    # key answers, nothing moves twice.
    PendingReport.objects.filter(pk=row.pk).update(state="pending")
    assert outbox.drain(acme_graph.pk)["applied"] == 1
    assert reload(row).result["status"] == "duplicate"
    assert UpdateBatch.objects.count() == 1 and UseEvent.objects.count() == 1
    assert reload(edges["ab"]).weight == pytest.approx(0.55)


def test_a_refused_input_is_recorded_as_refused(api, ada, acme_graph, small_graph, surfaced, edges):
    _post(api, ada, acme_graph, "s1", "uses", {"items": [{"node": small_graph["c"].pk}]})
    _post(api, ada, acme_graph, "s1", "uses", {"items": [{"edge": edges["ab"].pk}]})
    # The node is archived between the 202 and the worker: the action refuses it.
    type(small_graph["c"]).objects.filter(pk=small_graph["c"].pk).update(archived=True)
    counts = outbox.drain(acme_graph.pk)
    assert (counts["refused"], counts["applied"]) == (1, 1)
    refused, applied = PendingReport.objects.order_by("id")
    assert refused.state == "refused" and refused.result["status"] == "refused"
    # One wording at intake (a 400) and in the drain (refused): report.unknown_item.
    assert f"Unknown node {small_graph['c'].pk} in this graph." in refused.last_error
    assert applied.state == "applied"
    assert UpdateBatch.objects.count() == 1
    # Refused rows are not picked up again.
    assert outbox.stale_graphs(stale_seconds=0) == []
