"""Dashboard pages that change things or need a role: tune (operator), rollback (operator), impact (analyst)."""

from datetime import date

import pytest

from feedback import actions, metrics
from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, EdgeType, PolicyRevision
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare


@pytest.fixture
def manual_batch(rg, oscar):
    edge = rg["edges"]["a>b"]
    result = actions.do_set_weights(
        rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.2)], actor=oscar, reason="test"
    )
    return UpdateBatch.objects.get(pk=result.batch_id), edge


def _tune_post(current, edge_types, **over):
    data = {**current.numbers(), "note": "", **{f"priority_{et.pk}": et.priority for et in edge_types}}
    data.update(over)
    return data


def test_operator_saves_priority_and_policy(client, rg, oscar):
    g = rg["graph"]
    client.force_login(oscar)
    page = client.get(f"/g/{g.pk}/tune/").content.decode()
    assert 'id="preview-button"' in page and "r1" in page
    types = list(EdgeType.objects.filter(graph=g).order_by("name"))
    depends = next(t for t in types if t.name == "depends_on")
    data = _tune_post(
        g.current_policy(), types, **{f"priority_{depends.pk}": 0.5, "learning_rate": 0.15, "note": "tuned"}
    )
    response = client.post(f"/g/{g.pk}/tune/", data)
    assert response.status_code == 302
    depends.refresh_from_db()
    assert depends.priority == 0.5
    assert g.current_policy().revision == 2 and g.current_policy().learning_rate == 0.15
    assert AuditEvent.objects.filter(action="edgetype.priority.update").count() == 1
    assert AuditEvent.objects.filter(action="policy.update").count() == 1
    page = client.get(f"/g/{g.pk}/tune/").content.decode()
    assert "learning_rate</code>: 0.1 → 0.15" in page


def test_bad_tune_input_names_the_field_and_writes_nothing(client, rg, oscar):
    g = rg["graph"]
    client.force_login(oscar)
    types = list(EdgeType.objects.filter(graph=g))
    response = client.post(f"/g/{g.pk}/tune/", _tune_post(g.current_policy(), types, learning_rate=0.9))
    assert response.status_code == 200 and "learning_rate" in response.content.decode()
    assert "Ensure this value is less than or equal to 0.5" in response.content.decode()
    assert (
        PolicyRevision.objects.filter(graph=g).count() == 1
        and not AuditEvent.objects.filter(action="policy.update").exists()
    )


def test_whatif_preview_writes_nothing(client, rg, oscar):
    g, nodes = rg["graph"], rg["nodes"]
    assemble_context(
        prepare(g, RetrievalRequest(session="s1", query="vector search", start_nodes=[nodes["a"].pk], budget=3))
    )
    client.force_login(oscar)
    types = list(EdgeType.objects.filter(graph=g))
    related = next(t for t in types if t.name == "related")
    before = (PolicyRevision.objects.count(), AuditEvent.objects.count())
    response = client.post(
        f"/g/{g.pk}/tune/preview/",
        _tune_post(g.current_policy(), types, **{f"priority_{related.pk}": -1.0, "coef_priority": 3.0}),
    )
    body = response.content.decode()
    assert response.status_code == 200 and "Replayed <strong>1</strong>" in body and "top-1" in body
    assert (PolicyRevision.objects.count(), AuditEvent.objects.count()) == before
    related.refresh_from_db()
    assert related.priority == 0.0


@pytest.mark.parametrize("user_fixture", ["rita", "ana"])
def test_tune_needs_operator(request, client, rg, user_fixture):
    client.force_login(request.getfixturevalue(user_fixture))
    g = rg["graph"]
    assert client.get(f"/g/{g.pk}/tune/").status_code == 403
    assert client.post(f"/g/{g.pk}/tune/preview/", {}).status_code == 403
    assert "Edge types &amp; policy" not in client.get(f"/g/{g.pk}/").content.decode()


def test_operator_rolls_back_from_the_batch_page(client, manual_batch, rg, oscar):
    batch, edge = manual_batch
    client.force_login(oscar)
    page = client.get(f"/g/{rg['graph'].pk}/batches/{batch.pk}/").content.decode()
    assert 'id="rollback-button"' in page
    response = client.post(f"/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/")
    new = UpdateBatch.objects.get(rollback_of=batch)
    assert response.status_code == 302 and response["Location"].endswith(f"/batches/{new.pk}/")
    edge.refresh_from_db()
    assert edge.weight == 0.9
    page = client.get(response["Location"]).content.decode()
    assert f'rolls back <a href="/g/{rg["graph"].pk}/batches/{batch.pk}/">#{batch.pk}</a>' in page
    # Twice is refused with a message, nothing written.
    client.post(f"/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/")
    assert UpdateBatch.objects.filter(kind="rollback").count() == 1


def test_rollback_reports_conflicts(client, manual_batch, rg, oscar):
    batch, edge = manual_batch
    actions.do_set_weights(rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.3)], actor=oscar)
    client.force_login(oscar)
    response = client.post(f"/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/", follow=True)
    assert "1 conflict(s)" in response.content.decode()
    edge.refresh_from_db()
    assert edge.weight == 0.3


@pytest.mark.parametrize("user_fixture", ["rita", "ana"])
def test_readers_see_no_rollback_button_and_are_refused(request, client, manual_batch, rg, user_fixture):
    batch, edge = manual_batch
    client.force_login(request.getfixturevalue(user_fixture))
    page = client.get(f"/g/{rg['graph'].pk}/batches/{batch.pk}/").content.decode()
    assert "rollback-button" not in page
    assert client.post(f"/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/").status_code == 403
    edge.refresh_from_db()
    assert edge.weight == 0.2


def test_outsider_cannot_roll_back(client, manual_batch, rg, mallory):
    batch, _ = manual_batch
    client.force_login(mallory)
    assert client.post(f"/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/").status_code == 404


def test_admin_rollback_action(client, manual_batch, rg, oscar):
    batch, edge = manual_batch
    oscar.is_staff = True
    oscar.is_superuser = True
    oscar.save()
    client.force_login(oscar)
    client.post("/admin/feedback/updatebatch/", {"action": "rollback_batches", "_selected_action": [batch.pk]})
    edge.refresh_from_db()
    assert edge.weight == 0.9 and UpdateBatch.objects.filter(rollback_of=batch).exists()


def test_impact_and_overview_charts_from_rollups(client, manual_batch, rg, ana, rita):
    metrics.rollup(rg["graph"], date.today())
    client.force_login(ana)
    g = rg["graph"].pk
    page = client.get(f"/g/{g}/impact/").content.decode()
    assert "impact-weights" in page and "impact-updates" in page and "1 day(s)" in page
    csv = client.get(f"/g/{g}/impact/?format=csv")
    assert csv["Content-Type"] == "text/csv" and b"updates,manual/related/weight,count,1" in csv.content
    assert "error" in client.get(f"/g/{g}/impact/?from=nope").content.decode()
    overview = client.get(f"/g/{g}/").content.decode()
    assert all(f in overview for f in ("fig-scores", "fig-updates", "fig-top-used", "fig-weights"))
    client.force_login(rita)
    assert client.get(f"/g/{g}/impact/").status_code == 403
    assert "Feedback impact" not in client.get(f"/g/{g}/").content.decode()
