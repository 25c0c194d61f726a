"""A context call's COMMIT and a use report's reinforcement on the same nodes or edges never deadlock.

The context call writes its candidate log (and new counter rows) in rank order; their foreign keys
are deferred, so at COMMIT PostgreSQL takes a KEY SHARE lock on each referenced node and edge, in
that order. The reinforcement locks the rows it moves in id order. When its lock conflicted with
KEY SHARE (``FOR UPDATE``), the two crossed: the COMMIT held KEY SHARE on X (ranked first, higher
id) and waited for Y, which the reinforcement had locked and held while it waited for X: "deadlock
detected" at N=4 agents in the load test. The test builds exactly that crossing with three real
connections and asserts both transactions commit with the right weights.

The crossing is ordered by a third transaction holding FOR SHARE on X: it blocks the reinforcement
on X after it has locked Y, and lets the COMMIT's KEY SHARE on X through.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest
from django.db import connection, transaction

from feedback import actions
from feedback.actions import UseItem
from feedback.models import InjectionCandidate
from graphadmin.models import Edge, Node
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from tests.feedback.conftest import make_session

TIMEOUT = 30


def in_thread(fn):
    """Run ``fn`` in a thread with its own database connection; returns (thread, box with result or error)."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn()
        except Exception as exc:  # surfaced by the assertions below
            box["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, box


def backend_pid() -> int:
    with connection.cursor() as cur:
        cur.execute("SELECT pg_backend_pid()")
        return cur.fetchone()[0]


def waits_on_a_lock(pid: int) -> bool:
    with connection.cursor() as cur:
        cur.execute("SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid])
        row = cur.fetchone()
    return bool(row and row[0])


def until(predicate, what: str, timeout: float = TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def crossing_pair(ids: list[int]) -> tuple[int, int]:
    """(X, Y): X checked before Y at the COMMIT (rank order) but after it in id order."""
    for i, x in enumerate(ids):
        for y in ids[i + 1 :]:
            if y < x:
                return x, y
    raise AssertionError(f"no crossing pair in {ids}: the fixture no longer ranks against id order")


@pytest.mark.parametrize("kind", ["node", "edge"])
@pytest.mark.django_db(transaction=True)
def test_a_context_commit_and_a_reinforcement_on_crossed_rows_both_commit(kind, rg, oscar):
    graph = rg["graph"]
    model = Node if kind == "node" else Edge
    commit_now, release_holder = threading.Event(), threading.Event()
    pids, candidates, held = queue.Queue(), queue.Queue(), threading.Event()

    def context():
        # As the context view runs: inside the request's transaction (ATOMIC_REQUESTS).
        with transaction.atomic():
            pids.put(backend_pid())
            result = assemble_context(
                prepare(graph, RetrievalRequest(session="reader", query="architecture graph memory", k=1, hops=2))
            )
            rows = InjectionCandidate.objects.filter(injection=result.injection).order_by("rank")
            candidates.put(list(rows.values_list(f"{kind}_id", flat=True)))
            assert commit_now.wait(TIMEOUT)
        return result

    c_thread, c_box = in_thread(context)
    c_pid = pids.get(timeout=TIMEOUT)
    until(lambda: not candidates.empty() or "error" in c_box, "the context call's candidate log")
    assert "error" not in c_box, c_box.get("error")
    x, y = crossing_pair([i for i in candidates.get() if i is not None])

    # The reporter's own session, which surfaced X and Y.
    if kind == "node":
        session = make_session(
            graph, "writer", [(Node.objects.get(pk=x), None, True), (Node.objects.get(pk=y), None, True)]
        )
    else:
        ex, ey = Edge.objects.get(pk=x), Edge.objects.get(pk=y)
        session = make_session(graph, "writer", [(ex.target, ex, True), (ey.target, ey, True)])
    before = dict(
        model.objects.filter(pk__in=[x, y]).values_list("pk", "weight" if kind == "edge" else "feedback_weight")
    )

    def holder():
        with transaction.atomic(), connection.cursor() as cur:
            cur.execute(f"SELECT 1 FROM {model._meta.db_table} WHERE id = %s FOR SHARE", [x])
            held.set()
            assert release_holder.wait(TIMEOUT)

    h_thread, h_box = in_thread(holder)
    assert held.wait(TIMEOUT)

    def report():
        pids.put(backend_pid())
        items = [UseItem(kind, x, "explicit"), UseItem(kind, y, "explicit")]
        return actions.do_record_uses(session, items, actor=oscar)

    w_thread, w_box = in_thread(report)
    w_pid = pids.get(timeout=TIMEOUT)
    until(lambda: waits_on_a_lock(w_pid), "the reinforcement to wait on X (it holds Y)")

    commit_now.set()
    # The COMMIT's KEY SHARE checks must not wait for the reinforcement: the context call commits
    # while the reinforcement is still blocked.
    c_thread.join(timeout=10)
    committed_first = not c_thread.is_alive()
    release_holder.set()
    for thread in (c_thread, h_thread, w_thread):
        thread.join(timeout=TIMEOUT)
    assert "error" not in c_box, c_box.get("error")
    assert "error" not in w_box, w_box.get("error")
    assert "error" not in h_box, h_box.get("error")
    assert committed_first, "the context COMMIT waited for the reinforcement's row locks"
    assert not waits_on_a_lock(c_pid)

    assert w_box["result"].status == "applied"
    field_name = "weight" if kind == "edge" else "feedback_weight"
    for pk in (x, y):
        after = getattr(model.objects.get(pk=pk), field_name)
        assert after == pytest.approx(before[pk] + 0.1 * (1 - before[pk]))
