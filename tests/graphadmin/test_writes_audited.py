"""Every write of the core goes through graphadmin.actions and leaves an audit event: the admin's edits of
edge-type priorities and membership roles, and deleting a graph or archiving a node or an edge through the API."""

import pytest
from django.contrib.auth.models import Permission

from graphadmin import audit
from graphadmin.models import AuditEvent, Edge, EdgeType, Graph, Membership, Node


@pytest.fixture
def staff(db):
    def make(user):
        user.is_staff = True
        user.save()
        user.user_permissions.set(Permission.objects.all())
        return user

    return make


def test_admin_priority_edit_is_audited(client, acme_graph, oscar, staff):
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    client.force_login(staff(oscar))
    response = client.post(
        f"/admin/graphadmin/edgetype/{related.pk}/change/",
        {"name": "related", "priority": "0.4", "description": related.description},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    assert EdgeType.objects.get(pk=related.pk).priority == 0.4
    event = AuditEvent.objects.get(action="edgetype.priority.update")
    assert event.actor == "user:oscar" and event.payload == {"edge_type": "related", "before": 0.0, "after": 0.4}
    assert audit.verify(acme_graph.organization).ok


def test_admin_priority_edit_needs_the_tune_role(client, acme_graph, rita, staff):
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    client.force_login(staff(rita))  # a reviewer with every Django permission
    response = client.post(
        f"/admin/graphadmin/edgetype/{related.pk}/change/", {"name": "related", "priority": "0.4", "description": ""}
    )
    assert response.status_code == 403
    assert EdgeType.objects.get(pk=related.pk).priority == 0.0
    assert not AuditEvent.objects.filter(action="edgetype.priority.update").exists()


def test_admin_role_edit_is_audited(client, acme, alice, rita, staff):
    membership = Membership.objects.get(user=rita, organization=acme)
    client.force_login(staff(alice))
    response = client.post(f"/admin/graphadmin/membership/{membership.pk}/change/", {"role": "operator"})
    assert response.status_code == 302, response.content.decode()[:2000]
    assert Membership.objects.get(pk=membership.pk).role == "operator"
    event = AuditEvent.objects.get(action="membership.grant")
    assert event.actor == "user:alice"
    assert event.payload == {"user": "rita", "role": "operator", "before": "reviewer"}


def test_admin_role_edit_needs_the_admin_role(client, acme, oscar, rita, staff):
    membership = Membership.objects.get(user=rita, organization=acme)
    client.force_login(staff(oscar))
    response = client.post(f"/admin/graphadmin/membership/{membership.pk}/change/", {"role": "admin"})
    assert response.status_code == 403
    assert Membership.objects.get(pk=membership.pk).role == "reviewer"
    assert not AuditEvent.objects.filter(action="membership.grant").exists()


def test_graph_delete_through_the_api_is_audited(api, acme_graph, alice):
    graph_id = acme_graph.pk
    assert api(alice).delete(f"/api/graphs/{graph_id}/").status_code == 204
    assert not Graph.objects.filter(pk=graph_id).exists()
    event = AuditEvent.objects.get(action="graph.delete")
    assert event.actor == "user:alice" and event.payload == {"slug": "memory"} and event.scope == {"graph": graph_id}


def test_graph_settings_change_through_the_api_is_audited(api, acme_graph, alice):
    response = api(alice).patch(f"/api/graphs/{acme_graph.pk}/", {"feedback_enabled": False}, format="json")
    assert response.status_code == 200 and response.json()["feedback_enabled"] is False
    event = AuditEvent.objects.get(action="graph.update")
    assert event.payload == {"changes": {"feedback_enabled": {"before": True, "after": False}}}


def test_archive_through_the_api_is_audited(api, acme_graph, small_graph, oscar):
    node, edge = small_graph["a"], Edge.objects.filter(graph=acme_graph).first()
    base = f"/api/graphs/{acme_graph.pk}"
    assert api(oscar).delete(f"{base}/nodes/{node.pk}/").status_code == 204
    assert api(oscar).delete(f"{base}/edges/{edge.pk}/").status_code == 204
    assert Node.objects.get(pk=node.pk).archived and Edge.objects.get(pk=edge.pk).archived
    assert AuditEvent.objects.get(action="node.archive").payload == {"node": node.pk}
    assert AuditEvent.objects.get(action="edge.archive").payload == {"edge": edge.pk}
    assert audit.verify(acme_graph.organization).ok


def test_admin_graph_edit_is_audited(client, acme_graph, alice, oscar, staff):
    form = {
        "slug": "memory",
        "name": "Renamed",
        "description": "",
        "feedback_enabled": "on",
        "text_search_config": "english",
    }
    client.force_login(staff(oscar))  # an operator may not edit the graph itself
    assert client.post(f"/admin/graphadmin/graph/{acme_graph.pk}/change/", form).status_code == 403
    client.force_login(staff(alice))
    assert client.post(f"/admin/graphadmin/graph/{acme_graph.pk}/change/", form).status_code == 302
    assert Graph.objects.get(pk=acme_graph.pk).name == "Renamed"
    event = AuditEvent.objects.get(action="graph.update")
    assert event.payload == {"changes": {"name": {"before": "Acme memory", "after": "Renamed"}}}


def test_node_and_edge_create_and_update_through_the_api_are_audited(api, acme_graph, small_graph, oscar):
    base = f"/api/graphs/{acme_graph.pk}"
    created = api(oscar).post(f"{base}/nodes/", {"key": "new-note", "title": "New", "text": "t"}, format="json")
    assert created.status_code == 201, created.content
    node_id = created.json()["id"]
    assert api(oscar).patch(f"{base}/nodes/{node_id}/", {"title": "Renamed"}, format="json").status_code == 200
    assert Node.objects.get(pk=node_id).title == "Renamed"
    edge = api(oscar).post(
        f"{base}/edges/",
        {"source": node_id, "target": small_graph["a"].pk, "edge_type": "related"},
        format="json",
    )
    assert edge.status_code == 201, edge.content
    assert AuditEvent.objects.get(action="node.create").payload == {
        "node": node_id,
        "fields": ["key", "text", "title"],
    }
    assert AuditEvent.objects.get(action="node.update").payload == {"node": node_id, "fields": ["title"]}
    assert AuditEvent.objects.get(action="edge.create").payload["edge"] == edge.json()["id"]
    assert audit.verify(acme_graph.organization).ok
