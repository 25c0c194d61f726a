"""Rolling back a memory batch: created notes and links archived, changed texts and forgotten notes
restored, rows changed since reported as conflicts (or overwritten with force); the rollback of the
rollback re-applies the call."""

from __future__ import annotations

import pytest

from feedback import actions, memory
from feedback.imports import do_import_vault
from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, Edge, Node
from graphadmin.vault.parse import parse_vault

pytestmark = pytest.mark.django_db


def batch(pk) -> UpdateBatch:
    return UpdateBatch.objects.get(pk=pk)


def test_rolling_back_a_remember_archives_what_it_created(acme_graph, small_graph, ada, oscar, api):
    body = memory.do_remember(
        acme_graph,
        {"text": "See [[a]] for the layout.", "links": [{"node": "b", "type": "related"}]},
        actor=ada,
        role="agent",
    )
    node = Node.objects.get(pk=body["node"])
    edges = list(Edge.objects.filter(source=node))
    assert len(edges) == 2 and not node.archived
    response = api(oscar).post(f"/api/batches/{body['batch']}/rollback/", {}, format="json")
    assert response.status_code == 200, response.json()
    result = response.json()
    assert result["node_updates"] == 1 and result["edge_updates"] == 2 and result["conflicts"] == 0
    node.refresh_from_db()
    assert node.archived and all(e.archived for e in Edge.objects.filter(source=node))
    assert batch(body["batch"]).status == "rolled_back"
    assert AuditEvent.objects.filter(action="batch.rollback").count() == 1
    # Twice: refused, as every batch.
    assert api(oscar).post(f"/api/batches/{body['batch']}/rollback/", {}, format="json").status_code == 409
    # The rollback of the rollback brings the note back.
    actions.do_rollback_batch(batch(result["batch_id"]), actor=oscar)
    node.refresh_from_db()
    assert not node.archived and not any(e.archived for e in Edge.objects.filter(source=node))


def test_rolling_back_an_update_restores_the_text_and_its_vector(acme_graph, ada, oscar):
    first = memory.do_remember(
        acme_graph, {"text": "Builds take four minutes.", "key": "ci/build"}, actor=ada, role="agent"
    )
    vector = list(Node.objects.get(pk=first["node"]).embedding)
    second = memory.do_remember(
        acme_graph,
        {"text": "Builds take eleven minutes since the new linter.", "key": "ci/build"},
        actor=ada,
        role="agent",
    )
    assert second["status"] == "updated"
    actions.do_rollback_batch(batch(second["batch"]), actor=oscar)
    node = Node.objects.get(pk=first["node"])
    assert node.text == "Builds take four minutes." and not node.archived
    assert node.embedding is not None and list(node.embedding) == pytest.approx(vector, abs=1e-5)


def test_rolling_back_a_forget_restores_the_notes(acme_graph, ada, oscar):
    note = memory.do_remember(acme_graph, {"text": "Temporary finding.", "key": "tmp"}, actor=ada, role="agent")
    gone = memory.do_forget(acme_graph, {"nodes": [note["node"]]}, actor=ada, role="agent")
    assert Node.objects.get(pk=note["node"]).archived
    actions.do_rollback_batch(batch(gone["batch"]), actor=oscar)
    assert not Node.objects.get(pk=note["node"]).archived


def test_a_row_changed_since_is_a_conflict_unless_forced(acme_graph, ada, oscar):
    first = memory.do_remember(acme_graph, {"text": "Version one.", "key": "k"}, actor=ada, role="agent")
    second = memory.do_remember(acme_graph, {"text": "Version two.", "key": "k"}, actor=ada, role="agent")
    memory.do_remember(acme_graph, {"text": "Version three.", "key": "k"}, actor=ada, role="agent")
    result = actions.do_rollback_batch(batch(second["batch"]), actor=oscar)
    assert result.conflicts == 1 and result.node_updates == 0
    assert result.details["conflict_ids"] == {"node": [first["node"]]}
    assert Node.objects.get(pk=first["node"]).text == "Version three."
    # Its one change was left as it was (a conflict): stored as partially rolled back since issue 25.
    assert batch(second["batch"]).status == "partially_rolled_back"
    # force on another batch: the first (creation) is undone even though the text moved on
    forced = actions.do_rollback_batch(batch(first["batch"]), actor=oscar, force=True)
    assert forced.conflicts == 0 and forced.node_updates == 1
    node = Node.objects.get(pk=first["node"])
    assert node.archived and node.text == "Version three."  # undoing a creation archives, it keeps the text


def test_a_restored_key_taken_since_is_a_conflict_even_with_force(acme_graph, oscar, tmp_path):
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "Old.md").write_text("A note that moves.\n")
    (vault / "Other.md").write_text("Links to [[Old]].\n")
    do_import_vault(acme_graph, parse_vault(vault), actor="command:test", embed="sync")
    node = Node.objects.get(graph=acme_graph, key="Old")
    (vault / "Old.md").rename(vault / "New.md")  # same content: the importer renames the node
    moved = do_import_vault(acme_graph, parse_vault(vault), actor="command:test", embed="sync")
    node.refresh_from_db()
    assert node.key == "New"
    # an operator's note takes the old key meanwhile
    memory.do_remember(acme_graph, {"text": "Someone else took the key.", "key": "Old"}, actor=oscar, role="operator")
    result = actions.do_rollback_batch(batch(moved.batch_id), actor=oscar, force=True)
    assert result.conflicts == 1 and result.details["conflict_ids"]["node"] == [node.pk]
    node.refresh_from_db()
    assert node.key == "New" and not node.archived


def test_memory_batches_are_listed_by_session_and_kind(acme_graph, ada, api):
    memory.do_remember(acme_graph, {"text": "Listed."}, actor=ada, role="agent", session_id="s-9")
    rows = api(ada).get("/api/batches/", {"kind": "memory", "session": "s-9"}).json()["results"]
    assert [r["kind"] for r in rows] == ["memory"]
