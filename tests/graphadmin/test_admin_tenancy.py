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
