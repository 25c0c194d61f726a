"""A manual set and a rollback lock every row they will write before writing any, edges then nodes, in id order.

Both are several statements (one per target and field). Before, the edge-weight statement locked its
edges, then the feedback-weight statement waited for the next ones: a rollback could hold a high edge
while it waited for a low one, which an outcome (locking in id order) held while it waited for the
high one: a deadlock. The test makes the wait happen (another connection holds the low edge) and
checks, with a NOWAIT probe, that the waiting writer holds no other row yet.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from django.db import connection

from feedback import actions
from feedback.models import UpdateBatch
from feedback.rules import ManualValue
from graphadmin.models import Edge

from .conftest import raw_connection

pytestmark = pytest.mark.django_db(transaction=True)


def _waiting_on_a_lock(watcher) -> bool:
    return bool(
        watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    )


def _holds_nothing_while_waiting(write, low: Edge, high: Edge) -> None:
    """Hold ``low`` elsewhere; start ``write`` (which changes ``high``'s weight and ``low``'s feedback
    weight); once it waits, ``high`` must still be free; then let it finish."""
    locker, watcher, probe = raw_connection(), raw_connection(), raw_connection()
    locker.execute("BEGIN")
    locker.execute("SELECT id FROM graphadmin_edge WHERE id = %s FOR NO KEY UPDATE", [low.pk])
    outcome = {}

    def run():
        try:
            outcome["result"] = write()
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not _waiting_on_a_lock(watcher):
            assert time.monotonic() < deadline and thread.is_alive(), outcome
            time.sleep(0.05)
        probe.execute("BEGIN")
        try:
            probe.execute("SELECT id FROM graphadmin_edge WHERE id = %s FOR NO KEY UPDATE NOWAIT", [high.pk])
        except psycopg.errors.LockNotAvailable:
            pytest.fail(f"the writer holds edge {high.pk} while it waits for edge {low.pk}: two lock orders")
        finally:
            probe.execute("ROLLBACK")
    finally:
        locker.execute("COMMIT")
        thread.join(timeout=30)
        for conn in (locker, watcher, probe):
            conn.close()
    assert "error" not in outcome, outcome
    assert outcome["result"].status == "applied"


@pytest.fixture
def two_edges(small_graph):
    n = small_graph
    low, high = sorted(Edge.objects.filter(graph=n["a"].graph), key=lambda e: e.pk)
    return low, high


def test_a_manual_set_locks_its_rows_in_one_order(acme_graph, oscar, two_edges):
    low, high = two_edges
    values = [ManualValue("edge", high.pk, "weight", 0.9), ManualValue("edge", low.pk, "feedback_weight", 0.8)]
    _holds_nothing_while_waiting(lambda: actions.do_set_weights(acme_graph, values, actor=oscar), low, high)
    low.refresh_from_db()
    high.refresh_from_db()
    assert (high.weight, low.feedback_weight) == (0.9, 0.8)


def test_a_rollback_locks_its_rows_in_one_order(acme_graph, oscar, two_edges):
    low, high = two_edges
    values = [ManualValue("edge", high.pk, "weight", 0.9), ManualValue("edge", low.pk, "feedback_weight", 0.8)]
    batch = UpdateBatch.objects.get(pk=actions.do_set_weights(acme_graph, values, actor=oscar).batch_id)
    _holds_nothing_while_waiting(lambda: actions.do_rollback_batch(batch, actor=oscar), low, high)
    low.refresh_from_db()
    high.refresh_from_db()
    assert (high.weight, low.feedback_weight) == (0.5, 0.5)
