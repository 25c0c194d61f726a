"""A rollback of a batch while the drain applies a report on the same node and question edge (issue 41, item 2).

The drain's report locks its nodes (``queries.weights.REINFORCE``), then the ``answered`` edge of its question
(``queries.weights.TEACH``): nodes before that edge. A rollback locks every edge of its batch, then its nodes
(``queries.weights.lock_batch_rows``): that edge before the nodes. Both at once are a deadlock, and PostgreSQL
aborts one of them. Neither may be lost: the drain's report is retried in its savepoint
(``ledger.retry_transient``), and so must the rollback be, or the operator's click is a 500.

The test builds the crossing for certain: another client holds the report's second node, so the drain
stops between its first node and the question edge; the rollback then takes the question edge and waits
for the first node; the client lets go. Which of the two PostgreSQL aborts is chosen with each side's
``deadlock_timeout`` (the one that checks first is the victim).
"""

from __future__ import annotations

import math
import threading
import time

import pytest
from django.db import connection

from feedback import actions, outbox
from feedback.models import AgentSession, ContextInjection, InjectionCandidate, PendingReport, UpdateBatch
from feedback.report import Report
from feedback.rules import ANSWERED, UseItem
from graphadmin.models import Edge, Node

from .conftest import raw_connection

pytestmark = pytest.mark.django_db(transaction=True)

DIM = 384
QUESTION = [1.0] + [0.0] * (DIM - 1)


def _vector(axis: int) -> list[float]:
    v = [0.0] * DIM
    v[0], v[axis] = 0.8, math.sqrt(1 - 0.64)
    return v


def _asked(graph, external_id, nodes, owner):
    """A session whose one injection asked QUESTION (its reports teach the question's edges), selecting ``nodes``."""
    session = AgentSession.objects.create(graph=graph, external_id=external_id, owner=owner)
    injection = ContextInjection.objects.create(
        graph=graph,
        session=session,
        policy_revision=graph.current_policy(),
        query="when does the harbor crane shift start",
        query_embedding=QUESTION,
        query_model="test",
    )
    InjectionCandidate.objects.bulk_create(
        InjectionCandidate(injection=injection, graph=graph, rank=r, selected=True, node=n, total=1.0 - r / 10)
        for r, n in enumerate(nodes, start=1)
    )
    return session


def _waiting(watcher) -> int:
    return len(
        watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall()
    )


def _in_thread(call, deadlock_timeout: str, out: dict, name: str) -> threading.Thread:
    def run():
        try:
            with connection.cursor() as cur:
                cur.execute("SELECT set_config('deadlock_timeout', %s, false)", [deadlock_timeout])
            out[name] = call()
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            out[name + "_error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def _wait_until(watcher, waiting: int, threads, out) -> None:
    deadline = time.monotonic() + 30
    while _waiting(watcher) < waiting:
        assert time.monotonic() < deadline and all(t.is_alive() for t in threads), out
        time.sleep(0.02)


@pytest.mark.parametrize("victim", ["rollback", "drain"])
def test_a_rollback_crossing_the_drain_loses_nothing(acme_graph, oscar, ada, victim):
    graph = acme_graph
    first = Node.objects.create(graph=graph, key="crane", title="Crane", text="crane shift", embedding=_vector(10))
    second = Node.objects.create(graph=graph, key="ferry", title="Ferry", text="ferry times", embedding=_vector(11))
    assert first.pk < second.pk  # REINFORCE locks in id order: first, then (waiting) second
    taught = actions.do_record_uses(
        _asked(graph, "s1", [first], ada), [UseItem("node", first.pk, "explicit")], actor=oscar
    )
    answered = Edge.objects.get(graph=graph, target=first, edge_type__name=ANSWERED)
    assert taught.status == "applied" and answered.weight == 1.0  # the batch moved the node and its question edge

    later = _asked(graph, "s2", [first, second], ada)
    items = (UseItem("node", first.pk, "explicit"), UseItem("node", second.pk, "explicit"))
    outbox.record(ada, later, Report("uses", "crossing", items))

    locker, watcher = raw_connection(), raw_connection()
    out: dict = {}
    fast, slow = "50ms", "20s"
    locker.execute("BEGIN")
    locker.execute("SELECT id FROM graphadmin_node WHERE id = %s FOR NO KEY UPDATE", [second.pk])
    threads = []
    try:
        drain_timeout = fast if victim == "drain" else slow
        threads.append(_in_thread(lambda: outbox.drain(graph.pk), drain_timeout, out, "drain"))
        _wait_until(watcher, 1, threads, out)  # the drain holds `first`, waits for `second`
        batch = UpdateBatch.objects.get(pk=taught.batch_id)
        rollback_timeout = fast if victim == "rollback" else slow
        threads.append(
            _in_thread(lambda: actions.do_rollback_batch(batch, actor=oscar), rollback_timeout, out, "rollback")
        )
        _wait_until(watcher, 2, threads, out)  # the rollback holds the question edge, waits for `first`
    finally:
        locker.execute("COMMIT")
        for thread in threads:
            thread.join(timeout=60)
        locker.close()
        watcher.close()

    assert "rollback_error" not in out, out
    assert "drain_error" not in out, out
    assert out["rollback"].status == "applied"
    assert out["drain"]["applied"] == 1
    row = PendingReport.objects.get(idempotency_key="crossing")
    assert (row.state, row.attempts) == ("applied", 0)
    assert UpdateBatch.objects.get(pk=taught.batch_id).status in ("rolled_back", "partially_rolled_back")
    report_batch = UpdateBatch.objects.get(idempotency_key="crossing")
    assert report_batch.node_updates == 2
