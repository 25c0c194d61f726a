"""A ``forget`` of a note while a report that used it is queued (issue 41, item 2).

The drain checks a batch's items once, at its start (``report.stale_items``): a note archived before
that refuses its report. A forget committed after that check and before the report's write used to be
missed: the forgotten note's weight moved and the report counted as applied. REINFORCE now reads the
items' archived flag under its row lock, so the answer no longer depends on the moment: refused, in the
same words, nothing written.

The moment is made certain: another client holds the session's row, on which the report's write queues
after the drain's check; the forget commits meanwhile; the client lets go.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from feedback import outbox
from feedback.memory import do_forget
from feedback.models import AgentSession, PendingReport, UpdateBatch, UseEvent, WeightChange
from feedback.report import Report
from feedback.rules import UseItem

from .conftest import make_session, raw_connection, reload

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_note_forgotten_while_its_report_waits_refuses_the_report(acme_graph, small_graph, edges, oscar, ada):
    n = small_graph
    session = make_session(acme_graph, "s1", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)], ada)
    items = (UseItem("node", n["c"].pk, "explicit"), UseItem("node", n["b"].pk, "explicit"))
    outbox.record(ada, session, Report("uses", "used-then-forgotten", items))

    locker, watcher = raw_connection(), raw_connection()
    locker.execute("BEGIN")
    table = AgentSession._meta.db_table
    locker.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", [session.pk])  # noqa: S608 - a model's table
    out: dict = {}

    def drain():
        try:
            out["counts"] = outbox.drain(acme_graph.pk)
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            out["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=drain)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while not watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall():
            assert time.monotonic() < deadline and thread.is_alive(), out
            time.sleep(0.02)
        # The drain checked its items (all live) and waits on the session: now the note is forgotten.
        forgotten = do_forget(acme_graph, {"nodes": [n["c"].pk]}, actor=oscar, role="operator")
        assert forgotten["nodes"] == [n["c"].pk]
    finally:
        locker.execute("COMMIT")
        thread.join(timeout=60)
        locker.close()
        watcher.close()

    assert "error" not in out, out
    assert out["counts"]["refused"] == 1 and out["counts"]["applied"] == 0
    row = PendingReport.objects.get(idempotency_key="used-then-forgotten")
    assert row.state == "refused" and row.last_error == f"items: 0: node: Unknown node {n['c'].pk} in this graph."
    assert row.result["field"] == "items[0].node"
    # Nothing of the report was written: not the forgotten note, not the other one, not their paths.
    assert reload(n["c"]).feedback_weight == 0.5 and reload(n["b"]).feedback_weight == 0.5
    assert reload(edges["ab"]).weight == 0.5 and reload(edges["bc"]).weight == 0.5
    assert not UpdateBatch.objects.filter(kind="reinforce").exists()
    assert not UseEvent.objects.exists() and not WeightChange.objects.exists()
