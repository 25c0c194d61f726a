"""The organization admin can administer (issue 25 item 3): admin permissions come from the organization role,
not from Django's model permissions (the demo's ``admin`` is staff with none of them); a Members page on the
dashboard; 403 and 404 pages that say why and lead back."""

import pytest

from feedback import actions
from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, Edge, EdgeType, Membership, Node

pytestmark = pytest.mark.django_db


def _staff(user):
    """Staff with no Django model permission at all (what ``ensure_demo`` gives the demo's admin)."""
    user.is_staff = True
    user.save()
    assert not user.user_permissions.exists()
    return user


@pytest.fixture
def batch(acme_graph, oscar):
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    a, b = (Node.objects.create(graph=acme_graph, key=k, title=k.upper()) for k in "ab")
    edge = Edge.objects.create(graph=acme_graph, source=a, target=b, edge_type=related, weight=0.9)
    result = actions.do_set_weights(
        acme_graph, [actions.ManualValue("edge", edge.pk, "weight", 0.2)], actor=oscar, reason="test"
    )
    return UpdateBatch.objects.get(pk=result.batch_id), edge


def test_the_organization_admin_opens_the_admin_and_rolls_a_batch_back(client, alice, batch):
    batch, edge = batch
    client.force_login(_staff(alice))
    index = client.get("/admin/").content.decode()
    assert "You don’t have permission" not in index
    assert "Update batches" in index and "Memberships" in index and "Graphs" in index
    changelist = client.get("/admin/feedback/updatebatch/")
    assert changelist.status_code == 200
    assert "rollback_batches" in changelist.content.decode()
    response = client.post(
        "/admin/feedback/updatebatch/", {"action": "rollback_batches", "_selected_action": [batch.pk]}
    )
    assert response.status_code == 302
    edge.refresh_from_db()
    assert edge.weight == 0.9 and UpdateBatch.objects.filter(rollback_of=batch).exists()
    # Her role also lets her edit graphs and memberships, and see her organization's users.
    assert client.get("/admin/graphadmin/membership/add/").status_code == 200
    assert client.get("/admin/auth/user/").status_code == 200


def test_a_reviewer_with_staff_rights_reads_and_is_offered_no_rollback(client, rita, batch):
    batch, _edge = batch
    client.force_login(_staff(rita))
    assert client.get("/admin/feedback/updatebatch/").status_code == 200
    assert "rollback_batches" not in client.get("/admin/feedback/updatebatch/").content.decode()
    client.post("/admin/feedback/updatebatch/", {"action": "rollback_batches", "_selected_action": [batch.pk]})
    assert not UpdateBatch.objects.filter(rollback_of=batch).exists()
    assert client.get("/admin/graphadmin/membership/add/").status_code == 403
    assert client.get("/admin/auth/user/").status_code == 403  # users are an admin's


def test_staff_of_another_organization_sees_nothing_of_this_one(client, mallory, globex_graph, batch):
    batch, _edge = batch
    client.force_login(_staff(mallory))
    assert f">{batch.pk}<" not in client.get("/admin/feedback/updatebatch/").content.decode()
    assert client.get(f"/admin/feedback/updatebatch/{batch.pk}/change/").status_code in (302, 404)


def test_members_page_grants_changes_and_revokes_through_the_audited_actions(client, acme_graph, alice, ana, mallory):
    client.force_login(alice)
    url = f"/g/{acme_graph.pk}/members/"
    page = client.get(url).content.decode()
    assert "ana" in page and "analyst" in page and "mallory" not in page
    overview = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert f'href="{url}"' in overview
    # Change a role.
    assert client.post(url, {"op": "grant", "username": "ana", "role": "operator"}).status_code == 302
    assert Membership.objects.get(user=ana).role == "operator"
    assert AuditEvent.objects.filter(action="membership.grant", payload__user="ana").exists()
    # Another organization's member is an unknown name here: nothing revealed, nothing written.
    response = client.post(url, {"op": "grant", "username": "mallory", "role": "reviewer"}, HTTP_REFERER=url)
    assert response.status_code == 302
    assert not Membership.objects.filter(user=mallory, organization=acme_graph.organization).exists()
    assert "No user &#x27;mallory&#x27;" in client.get(url).content.decode()
    # Her own role is another admin's to change.
    client.post(url, {"op": "grant", "username": "alice", "role": "reviewer"}, HTTP_REFERER=url)
    assert Membership.objects.get(user=alice).role == "admin"
    # Revoke.
    client.post(url, {"op": "revoke", "username": "ana"})
    assert not Membership.objects.filter(user=ana).exists()
    assert AuditEvent.objects.filter(action="membership.revoke").count() == 1


def test_members_page_is_an_admins_and_the_403_names_the_role(client, acme_graph, oscar):
    client.force_login(oscar)
    response = client.get(f"/g/{acme_graph.pk}/members/")
    assert response.status_code == 403
    page = response.content.decode()
    assert "Your role in this organization, operator, may not do this (needs admin)." in page
    assert 'href="/"' in page  # a way back
    assert "Members" not in client.get(f"/g/{acme_graph.pk}/").content.decode()


def test_404_page_says_why_and_leads_back(client, acme_graph, mallory):
    client.force_login(mallory)
    response = client.get(f"/g/{acme_graph.pk}/")
    assert response.status_code == 404
    page = response.content.decode()
    assert "Not found" in page and "organization you are not a member of" in page and 'href="/"' in page


def test_a_refused_tune_form_starts_with_a_summary_that_links_the_field(client, acme_graph, oscar):
    from graphadmin.models import PolicyRevision

    client.force_login(oscar)
    current = acme_graph.current_policy()
    types = list(EdgeType.objects.filter(graph=acme_graph))
    data = {**current.numbers(), "note": "", **{f"priority_{t.pk}": t.priority for t in types}, "learning_rate": 0.9}
    page = client.post(f"/g/{acme_graph.pk}/tune/", data).content.decode()
    summary = page.split('id="error-summary"', 1)[1].split("</div>", 1)[0]
    assert "data-focus-on-load" in page and "Nothing was saved: fix 1 value" in summary
    assert 'href="#id_learning_rate"' in summary and "less than or equal to 0.5" in summary
    assert page.index('id="error-summary"') < page.index('id="tune-form"')
    assert PolicyRevision.objects.filter(graph=acme_graph).count() == 1
