"""An import into a graph that agents are reporting on (issue 41, item 2): their reports do not wait for it.

An import holds its graph's row for its whole transaction, so that a second import queues behind it. It
took the row ``FOR UPDATE``, the mode that also blocks the foreign-key checks (``KEY SHARE``) of every row
inserted that points at the graph: an agent's report (its outbox row), a context call's session and
injection. A long import (thousands of notes, embedded in the transaction) held every agent of the graph
for as long. ``FOR NO KEY UPDATE`` still queues the next import, and lets the agents through.

The import is held open here for certain: another client has inserted, and not committed, the edge type
the vault's typed link names, so the import waits on it after it took the graph's row.
"""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from feedback.imports import do_import_vault
from feedback.models import PendingReport
from graphadmin.models import EdgeType, Node
from graphadmin.vault.parse import parse_vault

from .conftest import make_session, raw_connection, url

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(call, out: dict, name: str) -> threading.Thread:
    def run():
        try:
            out[name] = call()
        except Exception as exc:  # noqa: BLE001 - reported by the assertions
            out[name + "_error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_an_agent_reports_while_an_import_holds_the_graph(acme_graph, small_graph, edges, ada, api, tmp_path):
    n = small_graph
    session = make_session(acme_graph, "s1", [(n["b"], edges["ab"], True)], ada)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "harbor.md").write_text("# Harbor\n\nThe crane shift starts at six.\n\ngated:: [[ferry]]\n")
    (vault / "ferry.md").write_text("# Ferry\n\nThe winter timetable.\n")

    gate, watcher = raw_connection(), raw_connection()
    gate.execute("BEGIN")
    gate.execute(
        "INSERT INTO graphadmin_edgetype (graph_id, name, priority, description, created_at, updated_at)"
        " VALUES (%s, 'gated', 0, '', now(), now())",
        [acme_graph.pk],
    )
    out: dict = {}
    threads = []
    try:
        threads.append(
            _in_thread(
                lambda: do_import_vault(acme_graph, parse_vault(vault), actor="command:test", embed="sync"),
                out,
                "import",
            )
        )
        deadline = time.monotonic() + 30
        while not watcher.execute(
            "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchall():
            assert time.monotonic() < deadline and threads[0].is_alive(), out
            time.sleep(0.02)
        # The import holds the graph's row and waits: an agent reports meanwhile.
        body = {"items": [{"node": n["b"].pk, "signal": "explicit"}]}
        threads.append(
            _in_thread(lambda: api(ada).post(url(acme_graph, "s1", "uses"), body, format="json"), out, "report")
        )
        threads[1].join(timeout=10)
        answered_during_import = not threads[1].is_alive()
        import_still_open = threads[0].is_alive()
    finally:
        gate.execute("ROLLBACK")
        for thread in threads:
            thread.join(timeout=60)
        gate.close()
        watcher.close()

    assert import_still_open
    assert answered_during_import, "the report waited for the import to commit"  # before: FOR UPDATE blocked it
    assert "report_error" not in out and out["report"].status_code == 202, out
    assert PendingReport.objects.filter(session=session).count() == 1
    assert "import_error" not in out, out
    assert out["import"].batch_id and not out["import"].dry_run
    assert Node.objects.filter(graph=acme_graph, key__in=["harbor", "ferry"]).count() == 2
    assert EdgeType.objects.filter(graph=acme_graph, name="gated").exists()
    _quiet()


def _quiet(seconds: float = 30.0) -> None:
    """Wait until no other connection is working in this database (the worker draining the queued report), so
    the test's flush does not meet its locks."""
    probe = raw_connection()
    try:
        deadline = time.monotonic() + seconds
        busy = """
            SELECT count(*) FROM pg_stat_activity
            WHERE datname = current_database() AND pid <> pg_backend_pid()
              AND state IN ('active', 'idle in transaction') AND backend_type = 'client backend'
        """
        while probe.execute(busy).fetchone()[0] and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        probe.close()
