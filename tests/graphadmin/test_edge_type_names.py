"""Edge types created or renamed through the API follow the vault importer's name rule
(graphadmin.vault.parse.EDGE_TYPE_NAME), so a name is never a formula or markup (issue 15 item 11)."""

import pytest

from graphadmin import actions
from graphadmin.errors import InputError
from graphadmin.models import AuditEvent, EdgeType


@pytest.mark.parametrize(
    "name", ['=HYPERLINK("http://x","y")', "+cmd", "Derived From", "a-b", "<b>x</b>", "", "x" * 101]
)
def test_api_refuses_names_the_importer_would_not_make(api, acme_graph, oscar, name):
    before = (EdgeType.objects.count(), AuditEvent.objects.count())
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/edge-types/", {"name": name}, format="json")
    assert response.status_code == 400 and "name" in response.json(), response.content
    assert (EdgeType.objects.count(), AuditEvent.objects.count()) == before


def test_rename_follows_the_rule(api, acme_graph, oscar):
    et = EdgeType.objects.get(graph=acme_graph, name="related")
    path = f"/api/graphs/{acme_graph.pk}/edge-types/{et.pk}/"
    assert api(oscar).patch(path, {"name": "=1+1"}, format="json").status_code == 400
    assert api(oscar).patch(path, {"name": "cites"}, format="json").status_code == 200


def test_good_name_is_created(api, acme_graph, oscar):
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/edge-types/", {"name": "cites_2"}, format="json")
    assert response.status_code == 201, response.content


def test_the_action_refuses_too(acme_graph, oscar):
    with pytest.raises(InputError) as exc:
        actions.do_create_edge_type(acme_graph, "=cmd", actor=oscar)
    assert "name" in exc.value.errors
