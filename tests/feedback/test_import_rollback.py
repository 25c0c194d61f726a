"""An import batch cannot be rolled back: refused with its reason (409 in the API, a message on the page).

Before, the rollback wrote an empty rollback batch and marked the import rolled back, undoing nothing.
"""

import shutil
from pathlib import Path

import pytest

from feedback import actions
from feedback.imports import do_import_vault
from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, Node
from graphadmin.vault.parse import parse_vault

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vault"
pytestmark = pytest.mark.django_db


@pytest.fixture
def imported(acme_graph, tmp_path):
    shutil.copytree(FIXTURE, tmp_path / "vault")
    result = do_import_vault(acme_graph, parse_vault(tmp_path / "vault"), actor="command:test")
    return UpdateBatch.objects.get(pk=result.batch_id)


def _nothing_written(batch, nodes):
    batch.refresh_from_db()
    assert batch.status == "applied"
    assert not UpdateBatch.objects.filter(kind="rollback").exists()
    assert not AuditEvent.objects.filter(action="batch.rollback").exists()
    assert Node.objects.filter(graph=batch.graph, archived=False).count() == nodes


def test_the_action_refuses_an_import(imported, oscar):
    nodes = Node.objects.filter(graph=imported.graph, archived=False).count()
    assert nodes > 0
    for force in (False, True):
        with pytest.raises(actions.RollbackRefused, match=f"batch {imported.pk} is an import, which cannot be"):
            actions.do_rollback_batch(imported, actor=oscar, force=force)
    _nothing_written(imported, nodes)


def test_the_api_answers_409_with_the_reason(imported, api, oscar):
    nodes = Node.objects.filter(graph=imported.graph, archived=False).count()
    response = api(oscar).post(f"/api/batches/{imported.pk}/rollback/", {}, format="json")
    assert response.status_code == 409
    assert "is an import, which cannot be rolled back" in response.json()["reason"]
    _nothing_written(imported, nodes)


def test_the_dashboard_explains_and_refuses(imported, client, oscar):
    nodes = Node.objects.filter(graph=imported.graph, archived=False).count()
    client.force_login(oscar)
    url = f"/g/{imported.graph.pk}/batches/{imported.pk}/"
    page = client.get(url).content.decode()
    assert 'id="rollback-button"' not in page and "An import cannot be rolled back" in page
    response = client.post(url + "rollback/", follow=True)
    assert response.redirect_chain[-1][0] == url
    assert "is an import, which cannot be rolled back" in response.content.decode()
    _nothing_written(imported, nodes)
