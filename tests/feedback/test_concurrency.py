"""8 concurrent reporters on overlapping edges: no lost update, no deadlock, a serial order exists.

Four threads report uses (alternating explicit and negative, so the order matters) on both edges;
four report outcomes (alternating accepted and rejected) of sessions that surfaced both edges and
nodes. Each thread has its own database connection and transaction.
"""

import threading
from datetime import UTC

import pytest
from django.db import connection

from feedback import actions
from feedback.actions import UseItem
from feedback.models import UpdateBatch, UseEvent, WeightChange
from feedback.queries import reads

from .conftest import make_session


def run_at_once(*calls):
    """Run each callable in its own thread (own connection), all released together; return the results.

    Any exception in a thread (a deadlock, a lost lock) fails the test."""
    barrier = threading.Barrier(len(calls))
    results, errors = [], []

    def run(call):
        try:
            barrier.wait(timeout=30)
            results.append(call())
        except Exception as exc:
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    return results


RULES = {
    "explicit": lambda w: w + 0.1 * (1 - w),
    "negative": lambda w: w - 0.1 * w,
    "accepted": lambda w: 0.1 * 1.0 + 0.9 * w,
    "rejected": lambda w: 0.1 * 0.0 + 0.9 * w,
}


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_reporters_lose_no_update(oscar, acme_graph, small_graph, edges):
    n = small_graph
    sessions = [
        make_session(acme_graph, f"c{i}", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)]) for i in range(8)
    ]

    def report(i):
        if i % 2 == 0:
            signal = "explicit" if i % 4 == 0 else "negative"
            # Opposite order of items in alternate threads: the engine must lock in id order anyway.
            items = [UseItem("edge", edges["ab"].pk, signal), UseItem("edge", edges["bc"].pk, signal)]
            return actions.do_record_uses(sessions[i], items if i % 4 else items[::-1], actor=oscar)
        return actions.do_apply_outcome(acme_graph, f"c{i}", "accepted" if i % 4 == 1 else "rejected", actor=oscar)

    run_at_once(*(lambda i=i: report(i) for i in range(8)))
    assert UpdateBatch.objects.count() == 8

    for edge in edges.values():
        edge.refresh_from_db()
        for field_name, expected_steps in (("weight", 4), ("feedback_weight", 4)):
            chain = list(WeightChange.objects.filter(edge=edge, field=field_name).order_by("id"))
            assert len(chain) == expected_steps
            value = 0.5
            for change in chain:  # the history is one serial order: each step starts where the last ended
                assert change.before == pytest.approx(value)
                assert change.after == pytest.approx(RULES[change.event](change.before))
                value = change.after
            assert getattr(edge, field_name) == pytest.approx(value)
    for node in (n["b"], n["c"]):
        node.refresh_from_db()
        chain = list(WeightChange.objects.filter(node=node).order_by("id"))
        assert len(chain) == 4
        value = 0.5
        for change in chain:
            assert change.before == pytest.approx(value)
            value = RULES[change.event](value)
        assert node.feedback_weight == pytest.approx(value)


@pytest.mark.django_db(transaction=True)
def test_the_same_report_delivered_twice_at_once_applies_once(oscar, acme_graph, small_graph, edges):
    session = make_session(acme_graph, "dup", [(small_graph["b"], edges["ab"], True)])

    def report():
        return actions.do_record_uses(
            session, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar, idempotency_key="same-report"
        )

    results = run_at_once(*[report] * 4)
    assert sorted(r.status for r in results) == ["applied", "duplicate", "duplicate", "duplicate"]
    assert len({r.batch_id for r in results}) == 1
    edges["ab"].refresh_from_db()
    assert edges["ab"].weight == pytest.approx(0.55)
    assert UpdateBatch.objects.count() == 1 and WeightChange.objects.count() == 1 and UseEvent.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_the_same_outcome_reported_at_once_applies_once(oscar, acme_graph, small_graph, edges):
    """Reporters of one session queue on its row lock; those that waited must see the batch the
    first one committed (their checks run after the lock, in a new snapshot) and answer duplicate."""
    make_session(acme_graph, "dup-outcome", [(small_graph["b"], edges["ab"], True)])

    def report(key):
        return actions.do_apply_outcome(acme_graph, "dup-outcome", "accepted", actor=oscar, idempotency_key=key)

    # Two deliveries of one report (same key) and two separate reports of the same outcome.
    results = run_at_once(*(lambda key=key: report(key) for key in ("r1", "r1", "r2", None)))
    assert sorted(r.status for r in results) == ["applied", "duplicate", "duplicate", "duplicate"]
    assert len({r.batch_id for r in results}) == 1
    edges["ab"].refresh_from_db()
    assert edges["ab"].feedback_weight == pytest.approx(0.55)
    assert UpdateBatch.objects.count() == 1 and WeightChange.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_decay_running_beside_use_reports_loses_no_update(oscar, acme_graph, small_graph, edges):
    """Decay chunks (plain UPDATE, block history) and use reports (locking path, row history) interleave:
    every edge's history, rows and block elements together, is one chain ending at its weight."""
    from datetime import datetime, timedelta

    later = datetime.now(UTC) + timedelta(days=15)
    sessions = [make_session(acme_graph, f"d{i}", [(small_graph["b"], edges["ab"], True)]) for i in range(4)]

    def report(i):
        items = [UseItem("edge", edges["ab"].pk, "explicit"), UseItem("edge", edges["bc"].pk, "explicit")]
        return actions.do_record_uses(sessions[i], items if i % 2 else items[::-1], actor=oscar)

    run_at_once(
        lambda: actions.do_decay(acme_graph, actor=oscar, now=later, chunk_size=1),
        *(lambda i=i: report(i) for i in range(4)),
    )
    rules = {**RULES, "decay": lambda w: max(0.1, w * 0.95)}
    for edge in edges.values():
        edge.refresh_from_db()
        changes = list(reads.history_of(acme_graph, "edge", edge.pk, field="weight"))
        assert sorted(c.event for c in changes) == ["decay", "explicit", "explicit", "explicit", "explicit"]
        value = 0.5
        while changes:  # rebuild the serial order: each step starts where the previous one ended
            step = next(c for c in changes if c.before == pytest.approx(value, abs=1e-12))
            assert step.after == pytest.approx(rules[step.event](step.before))
            value = step.after
            changes.remove(step)
        assert edge.weight == pytest.approx(value)
