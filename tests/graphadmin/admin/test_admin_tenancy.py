"""The Django admin shows staff users only their organizations' rows; ledgers are read-only there."""

import pytest
from django.contrib.auth.models import Permission

from graphadmin import audit
from graphadmin.models import Graph, Node


@pytest.fixture
def staff_mallory(mallory):
    mallory.is_staff = True
    mallory.save()
    mallory.user_permissions.set(Permission.objects.all())
    return mallory


def test_staff_sees_only_own_org(client, acme_graph, small_graph, globex_graph, staff_mallory):
    client.force_login(staff_mallory)
    page = client.get("/admin/graphadmin/graph/").content.decode()
    assert "Globex memory" in page and "Acme memory" not in page
    nodes = client.get("/admin/graphadmin/node/").content.decode()
    assert ">a<" not in nodes
    # Opening another organization's row by its id behaves as if it did not exist.
    response = client.get(f"/admin/graphadmin/graph/{acme_graph.pk}/change/")
    assert response.status_code in (302, 404)
    assert client.get(f"/admin/graphadmin/node/{small_graph['a'].pk}/change/").status_code in (302, 404)


def test_staff_cannot_link_rows_to_foreign_graph(client, acme_graph, globex_graph, staff_mallory):
    client.force_login(staff_mallory)
    response = client.post(
        "/admin/graphadmin/node/add/",
        {"graph": acme_graph.pk, "key": "x", "kind": "note", "title": "X", "aliases": "[]", "tags": "[]"},
    )
    assert response.status_code == 200  # form redisplayed with an error
    assert not Node.objects.filter(key="x").exists()


def test_audit_and_weight_history_are_read_only(client, acme, alice):
    alice.is_staff = True
    alice.is_superuser = True
    alice.save()
    event = audit.append(acme, alice, "test.event", {})
    client.force_login(alice)
    assert client.get("/admin/graphadmin/auditevent/add/").status_code == 403
    client.post(f"/admin/graphadmin/auditevent/{event.pk}/delete/", {"post": "yes"})
    assert type(event).objects.filter(pk=event.pk).exists()
    assert client.get("/admin/feedback/weightchange/add/").status_code == 403
    assert Graph.objects.count() == 0


# --- The admin follows org roles (issue 15 item 7): each attack, then what the roles allow. ---------------

from graphadmin.models import AuditEvent, EdgeType, Membership  # noqa: E402


def _staff(user):
    user.is_staff = True
    user.save()
    user.user_permissions.set(Permission.objects.all())
    return user


def test_a_reviewer_with_staff_rights_cannot_promote_herself(client, acme, rita):
    _staff(rita)
    client.force_login(rita)
    mine = Membership.objects.get(user=rita)
    assert client.get(f"/admin/graphadmin/membership/{mine.pk}/change/").status_code == 200  # she may look
    response = client.post(f"/admin/graphadmin/membership/{mine.pk}/change/", {"role": "admin"})
    assert response.status_code == 403
    assert client.post("/admin/graphadmin/membership/add/", {"user": rita.pk, "organization": acme.pk, "role": "admin"})
    assert Membership.objects.get(user=rita).role == "reviewer"
    assert not AuditEvent.objects.filter(action__startswith="membership").exists()
    # Nor through the user form: her own staff and superuser flags are not hers to set.
    form = {"username": "rita", "is_active": "on", "is_staff": "on", "is_superuser": "on"}
    form.update({"date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"})
    assert client.post(f"/admin/auth/user/{rita.pk}/change/", form).status_code == 403
    rita.refresh_from_db()
    assert not rita.is_superuser


def test_an_admin_grants_and_revokes_roles_through_the_audited_actions(client, acme, alice, ana):
    _staff(alice)
    client.force_login(alice)
    membership = Membership.objects.get(user=ana)
    response = client.post(f"/admin/graphadmin/membership/{membership.pk}/change/", {"role": "operator"})
    assert response.status_code == 302
    assert Membership.objects.get(user=ana).role == "operator"
    grant = AuditEvent.objects.get(action="membership.grant")
    assert grant.payload == {"user": "ana", "role": "operator", "before": "analyst"} and grant.actor == "user:alice"
    client.post(f"/admin/graphadmin/membership/{membership.pk}/delete/", {"post": "yes"})
    assert not Membership.objects.filter(user=ana).exists()
    revoke = AuditEvent.objects.get(action="membership.revoke")
    assert revoke.payload == {"user": "ana", "before": "operator"}


def test_the_membership_form_lists_only_users_of_the_organization(client, acme, alice, ana, mallory):
    _staff(alice)
    client.force_login(alice)
    page = client.get("/admin/graphadmin/membership/add/").content.decode()
    assert ">ana<" in page and ">alice<" in page
    assert "mallory" not in page
    assert "globex" not in page  # the organization choices: only those she administers
    assert "mallory" not in client.get("/admin/auth/user/").content.decode()


def test_another_orgs_staff_sees_no_graph_name_in_a_filter_nor_a_title_through_a_raw_id(
    client, acme_graph, globex_graph, small_graph, staff_mallory
):
    from graphadmin import actions

    secret = Node.objects.create(graph=acme_graph, key="s", title="Secret merger plan")
    actions.do_create_graph(acme_graph.organization, "acme-takeover", "Takeover", actor="test")
    client.force_login(staff_mallory)
    edge_types = client.get("/admin/graphadmin/edgetype/").content.decode()
    assert "globex/memory" in edge_types and "acme/" not in edge_types and "acme-takeover" not in edge_types
    form = client.get(f"/admin/graphadmin/edge/add/?source={secret.pk}&target={secret.pk}").content.decode()
    assert "Secret merger plan" not in form
    # The raw-id popup lists only her organization's nodes.
    popup = client.get("/admin/graphadmin/node/?_to_field=id&_popup=1").content.decode()
    assert "Secret merger plan" not in popup


def test_edits_need_the_role_and_go_through_the_audited_actions(client, acme_graph, small_graph, ana, oscar):
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    _staff(ana)
    client.force_login(ana)  # an analyst reads, changes nothing
    body = {"name": "related", "priority": "0.9", "description": ""}
    assert client.post(f"/admin/graphadmin/edgetype/{related.pk}/change/", body).status_code == 403
    assert client.post(f"/admin/graphadmin/node/{small_graph['a'].pk}/change/", {"title": "x"}).status_code == 403
    related.refresh_from_db()
    assert related.priority == 0.0
    _staff(oscar)
    client.force_login(oscar)
    assert client.post(f"/admin/graphadmin/edgetype/{related.pk}/change/", body).status_code == 302
    related.refresh_from_db()
    assert related.priority == 0.9
    assert AuditEvent.objects.filter(action="edgetype.priority.update").exists()
    node = small_graph["a"]
    form = {"key": node.key, "kind": node.kind, "title": "Renamed", "text": node.text, "source": "", "archived": "on"}
    form.update({"aliases": "[]", "tags": "[]"})
    response = client.post(f"/admin/graphadmin/node/{node.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    node.refresh_from_db()
    assert node.title == "Renamed" and node.archived
    assert AuditEvent.objects.get(action="node.update").payload["fields"] == ["archived", "title"]
    # Nodes are archived, never deleted here; outcomes are the feedback actions', read-only here.
    assert client.post(f"/admin/graphadmin/node/{node.pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.get("/admin/feedback/agentsession/add/").status_code == 403
