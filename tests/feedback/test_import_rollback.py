"""Rolling back an import batch: it archives the nodes and edges that import created and restores what
it changed or archived, with the conflict rules of every rollback (409 in the API, a message on the
page, only for an import recorded before imports kept their rows).

Before, an import recorded counts only and its rollback was refused with a 409.
"""

import shutil
from pathlib import Path

import pytest

from feedback import actions
from feedback.imports import do_import_vault
from feedback.models import UpdateBatch
from graphadmin import actions as core
from graphadmin.models import AuditEvent, Edge, Node
from graphadmin.vault.parse import parse_vault

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vault"
pytestmark = pytest.mark.django_db


def _import(graph, folder) -> UpdateBatch:
    result = do_import_vault(graph, parse_vault(folder), actor="command:test", embed="sync")
    return UpdateBatch.objects.get(pk=result.batch_id)


@pytest.fixture
def vault(tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "vault")
    return tmp_path / "vault"


@pytest.fixture
def imported(acme_graph, vault):
    return _import(acme_graph, vault)


def _live(graph):
    return (
        set(Node.objects.filter(graph=graph, archived=False).values_list("key", "text")),
        set(
            Edge.objects.filter(graph=graph, archived=False).values_list(
                "source__key", "target__key", "edge_type__name"
            )
        ),
    )


def test_rolling_back_the_first_import_archives_everything_it_created(imported, oscar):
    graph = imported.graph
    nodes = Node.objects.filter(graph=graph).count()
    assert nodes > 0
    result = actions.do_rollback_batch(imported, actor=oscar)
    assert result.status == "applied" and result.conflicts == 0
    assert result.node_updates == nodes and result.edge_updates == Edge.objects.filter(graph=graph).count()
    assert not Node.objects.filter(graph=graph, archived=False).exists()
    assert not Edge.objects.filter(graph=graph, archived=False).exists()
    imported.refresh_from_db()
    assert imported.status == "rolled_back"
    assert AuditEvent.objects.filter(action="batch.rollback").count() == 1
    with pytest.raises(actions.RollbackRefused):
        actions.do_rollback_batch(imported, actor=oscar)


def test_rolling_back_a_reimport_restores_texts_links_and_archived_notes(acme_graph, imported, vault, oscar):
    before = _live(acme_graph)
    home = vault / "Home.md"
    home.write_text(home.read_text() + "\nA new paragraph about [[Architecture]] and [[Brand New]].\n")
    (vault / "Brand New.md").write_text("# Brand New\n\nA note the second import adds.\n")
    gone = next(p for p in sorted(vault.rglob("*.md")) if p.name not in ("Home.md", "Brand New.md", "README.md"))
    gone_key = str(gone.relative_to(vault))[: -len(".md")]
    gone.unlink()
    second = _import(acme_graph, vault)
    assert _live(acme_graph) != before
    assert Node.objects.get(graph=acme_graph, key=gone_key).archived
    result = actions.do_rollback_batch(second, actor=oscar)
    assert result.conflicts == 0
    assert _live(acme_graph) == before
    assert Node.objects.get(graph=acme_graph, key="Brand New").archived
    home_node = Node.objects.get(graph=acme_graph, key="Home")
    assert home_node.embedding is not None  # embedded again after its text came back


def test_a_note_changed_since_the_import_is_a_conflict(acme_graph, imported, oscar, api):
    node = Node.objects.get(graph=acme_graph, key="Home")
    core.do_update_record(node, {"text": "Edited by hand after the import."}, actor=oscar)
    response = api(oscar).post(f"/api/batches/{imported.pk}/rollback/", {}, format="json")
    assert response.status_code == 200
    body = response.json()
    assert body["conflicts"] == 1 and body["details"]["conflict_ids"] == {"node": [node.pk]}
    node.refresh_from_db()
    assert not node.archived and node.text == "Edited by hand after the import."
    assert Node.objects.filter(graph=acme_graph, archived=False).count() == 1


def test_an_import_recorded_before_rows_were_kept_is_still_refused(imported, api, oscar, client):
    UpdateBatch.objects.filter(pk=imported.pk).update(details={"counts": imported.details["counts"]})
    nodes = Node.objects.filter(graph=imported.graph, archived=False).count()
    response = api(oscar).post(f"/api/batches/{imported.pk}/rollback/", {}, format="json")
    assert response.status_code == 409
    assert "is an import, which cannot be rolled back" in response.json()["reason"]
    imported.refresh_from_db()
    assert imported.status == "applied"
    assert not UpdateBatch.objects.filter(kind="rollback").exists()
    assert Node.objects.filter(graph=imported.graph, archived=False).count() == nodes
