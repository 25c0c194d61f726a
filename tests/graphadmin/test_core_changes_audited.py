"""Graph settings, edge types, nodes and edges: every create, update, archive and delete on every path that
has one (REST API, admin) goes through graphadmin.actions and leaves its audit event.

The dashboard edits only edge-type priorities and the policy (test_dashboard_actions.py) and the MCP tools
write no graph record, so these two paths have nothing more to audit here.
"""

import pytest
from django.contrib.auth.models import Permission

from graphadmin import audit
from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Node


@pytest.fixture
def staff(db):
    def make(user):
        user.is_staff = True
        user.save()
        user.user_permissions.set(Permission.objects.all())
        return user

    return make


def _events(action):
    return list(AuditEvent.objects.filter(action=action).order_by("seq"))


# ---------------------------------------------------------------------------------------------------------
# REST API


def test_a_graph_created_with_feedback_off_is_created_off_and_audited_so(api, acme, alice):
    response = api(alice).post(
        "/api/graphs/",
        {"organization": "acme", "slug": "quiet", "name": "Quiet", "feedback_enabled": False},
        format="json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["feedback_enabled"] is False
    assert Graph.objects.get(slug="quiet").feedback_enabled is False
    [event] = _events("graph.create")
    assert event.payload == {"slug": "quiet", "name": "Quiet", "feedback_enabled": False}


def test_edge_type_rename_and_description_through_the_api_are_audited(api, acme_graph, oscar):
    depends = EdgeType.objects.get(graph=acme_graph, name="depends_on")
    url = f"/api/graphs/{acme_graph.pk}/edge-types/{depends.pk}/"
    response = api(oscar).patch(url, {"name": "requires", "description": "needs"}, format="json")
    assert response.status_code == 200, response.content
    [event] = _events("edgetype.update")
    assert event.actor == "user:oscar"
    assert event.payload == {
        "edge_type": depends.pk,
        "name": "requires",
        "changes": {
            "name": {"before": "depends_on", "after": "requires"},
            "description": {"before": depends.description, "after": "needs"},
        },
    }
    assert not _events("edgetype.priority.update")
    # The same values again: nothing changed, nothing audited.
    assert api(oscar).patch(url, {"name": "requires"}, format="json").status_code == 200
    assert len(_events("edgetype.update")) == 1


def test_edge_type_delete_through_the_api_is_audited_and_refused_while_used(api, acme_graph, small_graph, oscar, rita):
    base = f"/api/graphs/{acme_graph.pk}/edge-types"
    related = EdgeType.objects.get(graph=acme_graph, name="related")  # used by a -> b
    spare = EdgeType.objects.get(graph=acme_graph, name="derived_from")  # used by no edge
    assert api(rita).delete(f"{base}/{spare.pk}/").status_code == 403
    refused = api(oscar).delete(f"{base}/{related.pk}/")
    assert refused.status_code == 409 and "used by 1 edge" in refused.json()["detail"]
    assert EdgeType.objects.filter(pk=related.pk).exists() and not _events("edgetype.delete")
    assert api(oscar).delete(f"{base}/{spare.pk}/").status_code == 204
    assert not EdgeType.objects.filter(pk=spare.pk).exists()
    [event] = _events("edgetype.delete")
    assert event.payload == {"edge_type": spare.pk, "name": "derived_from", "priority": 0.0}
    assert audit.verify(acme_graph.organization).ok


# ---------------------------------------------------------------------------------------------------------
# Admin


def test_admin_graph_create_keeps_feedback_off_and_delete_is_refused(client, acme, alice, staff):
    client.force_login(staff(alice))
    response = client.post(
        "/admin/graphadmin/graph/add/",
        {"organization": acme.pk, "slug": "quiet", "name": "Quiet", "description": "", "text_search_config": "english"},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    graph = Graph.objects.get(slug="quiet")
    assert graph.feedback_enabled is False  # the unticked box
    assert _events("graph.create")[0].payload["feedback_enabled"] is False
    # Deleting a graph in the admin would cascade to its policy revisions, which the admin may not delete
    # (read-only ledgers): refused, single or bulk, and nothing is deleted unaudited.
    bulk = {"action": "delete_selected", "_selected_action": [graph.pk], "post": "yes"}
    assert client.post("/admin/graphadmin/graph/", bulk).status_code == 403
    assert client.post(f"/admin/graphadmin/graph/{graph.pk}/delete/", {"post": "yes"}).status_code == 403
    assert Graph.objects.filter(pk=graph.pk).exists() and not _events("graph.delete")


def test_admin_edge_type_edit_is_audited_and_delete_refused(client, acme_graph, small_graph, oscar, staff):
    client.force_login(staff(oscar))
    spare = EdgeType.objects.get(graph=acme_graph, name="derived_from")
    response = client.post(
        f"/admin/graphadmin/edgetype/{spare.pk}/change/",
        {"name": "derives", "priority": "0.0", "description": spare.description},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    assert _events("edgetype.update")[0].payload["changes"] == {"name": {"before": "derived_from", "after": "derives"}}
    # The admin deletes no edge type (the API does, audited): refused, nothing deleted unaudited.
    assert client.post(f"/admin/graphadmin/edgetype/{spare.pk}/delete/", {"post": "yes"}).status_code == 403
    assert EdgeType.objects.filter(pk=spare.pk).exists() and not _events("edgetype.delete")
    assert audit.verify(acme_graph.organization).ok


def _node_form(graph, **values):
    form = {
        "graph": graph.pk,
        "key": "admin-note",
        "kind": "note",
        "title": "From the admin",
        "text": "body",
        "source": "",
        "aliases": "[]",
        "tags": "[]",
    }
    return {**form, **values}


def test_admin_node_create_update_and_archive_are_audited(client, acme_graph, small_graph, oscar, staff):
    client.force_login(staff(oscar))
    response = client.post("/admin/graphadmin/node/add/", _node_form(acme_graph))
    assert response.status_code == 302, response.content.decode()[:3000]
    node = Node.objects.get(graph=acme_graph, key="admin-note")
    [created] = _events("node.create")
    assert created.actor == "user:oscar" and created.payload["node"] == node.pk
    assert {"graph", "key", "title", "text"} - {"graph"} <= set(created.payload["fields"])

    url = f"/admin/graphadmin/node/{node.pk}/change/"
    assert client.post(url, _node_form(acme_graph, title="Renamed")).status_code == 302
    assert Node.objects.get(pk=node.pk).title == "Renamed"
    assert _events("node.update")[0].payload == {"node": node.pk, "fields": ["title"]}

    assert client.post(url, _node_form(acme_graph, title="Renamed", archived="on")).status_code == 302
    assert Node.objects.get(pk=node.pk).archived
    assert _events("node.update")[1].payload == {"node": node.pk, "fields": ["archived"]}
    assert client.post(url, _node_form(acme_graph, title="Renamed")).status_code == 302  # restored
    assert not Node.objects.get(pk=node.pk).archived
    assert _events("node.update")[2].payload == {"node": node.pk, "fields": ["archived"]}

    # The admin deletes no node (archiving is the change above): refused, single or bulk.
    assert client.post(f"/admin/graphadmin/node/{node.pk}/delete/", {"post": "yes"}).status_code == 403
    bulk = {"action": "delete_selected", "_selected_action": [node.pk], "post": "yes"}
    client.post("/admin/graphadmin/node/", bulk)
    assert Node.objects.filter(pk=node.pk, archived=False).exists()
    assert audit.verify(acme_graph.organization).ok


def test_admin_edge_create_is_audited_and_delete_refused(client, acme_graph, small_graph, oscar, staff):
    client.force_login(staff(oscar))
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    form = {
        "graph": acme_graph.pk,
        "source": small_graph["c"].pk,
        "target": small_graph["a"].pk,
        "edge_type": related.pk,
    }
    response = client.post("/admin/graphadmin/edge/add/", form)
    assert response.status_code == 302, response.content.decode()[:3000]
    edge = Edge.objects.get(source=small_graph["c"], target=small_graph["a"])
    [created] = _events("edge.create")
    assert created.payload["edge"] == edge.pk and {"source", "target", "edge_type"} <= set(created.payload["fields"])
    assert client.post(f"/admin/graphadmin/edge/{edge.pk}/delete/", {"post": "yes"}).status_code == 403
    assert not Edge.objects.get(pk=edge.pk).archived and not _events("edge.archive")


def test_a_reviewer_with_staff_rights_writes_no_node(client, acme_graph, small_graph, rita, staff):
    client.force_login(staff(rita))
    assert client.post("/admin/graphadmin/node/add/", _node_form(acme_graph)).status_code == 403
    assert client.post(f"/admin/graphadmin/node/{small_graph['a'].pk}/delete/", {"post": "yes"}).status_code == 403
    assert not Node.objects.filter(key="admin-note").exists() and not Node.objects.get(pk=small_graph["a"].pk).archived
    assert not AuditEvent.objects.filter(action__startswith="node.").exists()
