"""The worker's drain: one drain of many reports moves the weights exactly as one drain per report,
and a wake-up waits briefly for a session's outcome instead of leaving it to another drain."""

import threading
import time

import pytest
from django.db import connection, transaction
from django.test import override_settings

from feedback import outbox
from feedback.models import PendingReport, UpdateBatch, WeightChange
from feedback.queries import reports as report_queries
from feedback.report import Report
from feedback.rules import UseItem
from feedback.tasks import drain_reports_task
from graphadmin.audit import verify
from graphadmin.models import Edge, Node

from .conftest import make_session


def _reports(graph, small_graph, edges, ada):
    """Three sessions' reports over the same nodes and edges (uses, a flag, outcomes), in intake order."""
    n = small_graph
    shown = [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True), (n["a"], None, False)]
    s1, s2, s3 = (make_session(graph, f"s{i}", shown, ada) for i in (1, 2, 3))
    c, b = n["c"].pk, n["b"].pk
    return [
        (s1, Report("uses", "k1", (UseItem("node", c, "explicit"),))),
        (s2, Report("uses", "k2", (UseItem("node", b, "explicit"), UseItem("edge", edges["bc"].pk, "explicit")))),
        (s1, Report("outcome", "k3", outcome="accepted")),
        (s3, Report("uses", "k4", (UseItem("node", c, "negative"),))),
        (s2, Report("outcome", "k5", outcome="rework")),
        (s3, Report("outcome", "k6", outcome="rejected")),
    ]


def _weights(graph):
    """Every weight of the graph and the history: compared bit for bit (floats by ==)."""
    nodes = list(Node.objects.filter(graph=graph).order_by("key").values_list("key", "feedback_weight"))
    edges = list(
        Edge.objects.filter(graph=graph)
        .order_by("source__key", "target__key", "edge_type__name")
        .values_list("source__key", "target__key", "edge_type__name", "weight", "feedback_weight")
    )
    history = list(
        WeightChange.objects.filter(graph=graph)
        # In batch order, and within a batch by what changed: the order of one statement's rows (an UPDATE's
        # RETURNING) follows where PostgreSQL found them, which differs between two runs of the same writes.
        .order_by("batch_id", "node__key", "edge__source__key", "edge__target__key", "field", "id")
        .values_list("batch__idempotency_key", "node__key", "edge__target__key", "field", "before", "after", "event")
    )
    return nodes, edges, history


@pytest.mark.django_db
def test_one_drain_of_many_reports_moves_the_weights_as_one_drain_per_report(acme_graph, small_graph, edges, ada, acme):
    runs = []
    for one_at_a_time in (False, True):
        savepoint = transaction.savepoint()
        drained = 0
        for session, report in _reports(acme_graph, small_graph, edges, ada):
            outbox.record(ada, session, report)
            if one_at_a_time:
                drained += outbox.drain(acme_graph.pk)["applied"]
        if not one_at_a_time:
            counts = outbox.drain(acme_graph.pk)
            assert counts["batches"] == 1
            drained = counts["applied"]
        assert drained == 6 and set(PendingReport.objects.values_list("state", flat=True)) == {"applied"}
        # Still one batch and one audit event per report, each its own rollback.
        assert UpdateBatch.objects.filter(kind__in=("reinforce", "outcome")).count() == 6
        assert verify(acme).ok
        runs.append(_weights(acme_graph))
        transaction.savepoint_rollback(savepoint)
    together, alone = runs
    assert together == alone
    assert together[2]  # the reports did move weights


@pytest.mark.django_db
def test_a_wake_up_without_work_does_not_wait(acme_graph):
    started = time.monotonic()
    counts = outbox.drain(acme_graph.pk, window=5.0)
    assert counts["batches"] == 0 and time.monotonic() - started < 2.0


@pytest.mark.django_db
def test_a_session_whose_outcome_is_claimed_is_not_waited_for(acme_graph, surfaced, small_graph, ada):
    with transaction.atomic():
        outbox.record(ada, surfaced, Report("uses", "k1", (UseItem("node", small_graph["c"].pk, "explicit"),)))
        outbox.record(ada, surfaced, Report("outcome", "k2", outcome="accepted"))
    started = time.monotonic()
    counts = outbox.drain(acme_graph.pk, window=5.0)
    assert (counts["applied"], counts["batches"]) == (2, 1) and time.monotonic() - started < 2.0


@pytest.mark.django_db
def test_the_window_ends_when_no_outcome_comes(acme_graph, surfaced, small_graph, ada):
    with transaction.atomic():
        outbox.record(ada, surfaced, Report("uses", "k1", (UseItem("node", small_graph["c"].pk, "explicit"),)))
    started = time.monotonic()
    counts = outbox.drain(acme_graph.pk, window=0.3)
    elapsed = time.monotonic() - started
    assert (counts["applied"], counts["batches"]) == (1, 1) and 0.2 < elapsed < 3.0


@pytest.mark.django_db
@override_settings(OUTBOX_COALESCE_SECONDS=5.0)
def test_the_task_run_eagerly_does_not_wait(acme_graph, surfaced, small_graph, ada):
    with transaction.atomic():
        outbox.record(ada, surfaced, Report("uses", "k1", (UseItem("node", small_graph["c"].pk, "explicit"),)))
    started = time.monotonic()
    counts = drain_reports_task.apply(kwargs={"graph_id": acme_graph.pk}).get()
    assert counts["applied"] == 1 and time.monotonic() - started < 2.0


@pytest.mark.django_db(transaction=True)
def test_an_outcome_arriving_within_the_window_is_applied_in_the_same_batch(acme_graph, small_graph, edges, ada):
    n = small_graph
    session = make_session(acme_graph, "s1", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)], ada)
    outbox.record(ada, session, Report("uses", "k1", (UseItem("node", n["c"].pk, "explicit"),)))
    result = {}

    def drain():
        try:
            result["counts"] = outbox.drain(acme_graph.pk, window=10.0)
        finally:
            connection.close()

    worker = threading.Thread(target=drain)
    started = time.monotonic()
    worker.start()
    deadline = time.monotonic() + 10
    while not report_queries.drain_running(acme_graph.pk) and time.monotonic() < deadline:
        time.sleep(0.01)
    # The drain holds the graph's lock and waits for the session's outcome, the use report claimed but
    # not applied: the outcome's poke would find the drain running and send no task.
    assert report_queries.drain_running(acme_graph.pk)
    assert PendingReport.objects.get().state == "pending"
    outbox.record(ada, session, Report("outcome", "k2", outcome="accepted"))
    worker.join(timeout=15)
    assert not worker.is_alive()
    counts = result["counts"]
    assert (counts["applied"], counts["batches"], counts["busy"]) == (2, 1, False)
    assert time.monotonic() - started < 8.0  # it stopped waiting once the outcome came
    assert not report_queries.drain_running(acme_graph.pk)
    assert list(UpdateBatch.objects.order_by("id").values_list("kind", flat=True))[:2] == ["reinforce", "outcome"]
