"""Batches: list (constant query count), detail with changes, paginated changes, rollback endpoint."""

from datetime import UTC

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from feedback import actions
from feedback.actions import UseItem
from feedback.models import UpdateBatch

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_list_query_count_does_not_grow_with_batches(api, oscar, rita, acme_graph, small_graph, surfaced, edges):
    from .conftest import make_session

    actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    client = api(rita)
    with CaptureQueriesContext(connection) as few:
        assert client.get("/api/batches/").data["count"] == 1
    for n in range(5):
        session = make_session(acme_graph, f"more-{n}", [(small_graph["c"], edges["bc"], True)])
        actions.do_record_uses(session, [UseItem("edge", edges["bc"].pk, "negative")], actor=oscar)
    with CaptureQueriesContext(connection) as many:
        data = client.get("/api/batches/").data
    assert data["count"] == 6 and len(many) == len(few)
    first = data["results"][-1]
    assert (first["kind"], first["trigger_session"], first["trigger_user"], first["edge_updates"]) == (
        "reinforce",
        "s1",
        "oscar",
        1,
    )


def test_filters(api, oscar, rita, acme_graph, surfaced, edges):
    actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    client = api(rita)
    assert client.get(f"/api/batches/?graph={acme_graph.pk}&kind=outcome").data["count"] == 1
    assert client.get("/api/batches/?session=s1").data["count"] == 2
    assert client.get("/api/batches/?session=zz").data["count"] == 0
    assert client.get("/api/batches/?graph=x").status_code == 400


def test_detail_and_changes(api, oscar, rita, acme_graph, surfaced, edges):
    done = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    detail = api(rita).get(f"/api/batches/{done.batch_id}/").data
    assert detail["changes_total"] == 4 and len(detail["changes"]) == 4
    assert {(c["field"], c["before"], c["event"]) for c in detail["changes"]} == {("feedback_weight", 0.5, "accepted")}
    changes = api(rita).get(f"/api/batches/{done.batch_id}/changes/?limit=3").data
    assert changes["count"] == 4 and len(changes["results"]) == 3


def test_rollback_endpoint_conflicts_force_and_twice(api, oscar, surfaced, later, edges):
    first = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    second = actions.do_record_uses(later, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    client = api(oscar)
    response = client.post(f"/api/batches/{first.batch_id}/rollback/", {}, format="json")
    assert response.status_code == 200 and response.data["conflicts"] == 1
    assert response.data["details"]["conflict_ids"] == {"edge.weight": [edges["ab"].pk]}
    again = client.post(f"/api/batches/{first.batch_id}/rollback/", {"force": True}, format="json")
    assert again.status_code == 409 and again.data["status"] == "already_rolled_back"
    forced = client.post(f"/api/batches/{second.batch_id}/rollback/", {"force": True}, format="json")
    assert forced.status_code == 200 and forced.data["conflicts"] == 0
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert client.get(f"/api/batches/{first.batch_id}/").data["rolled_back_by"] == response.data["batch_id"]
    assert UpdateBatch.objects.filter(kind="rollback").count() == 2


def test_a_decay_batch_lists_its_block_changes(api, oscar, rita, client, acme_graph, edges):
    from datetime import datetime, timedelta

    decayed = actions.do_decay(acme_graph, actor=oscar, now=datetime.now(UTC) + timedelta(days=15))
    detail = api(rita).get(f"/api/batches/{decayed.batch_id}/").data
    assert detail["changes_total"] == 2
    assert [(c["id"], c["edge"], c["before"], c["event"]) for c in detail["changes"]] == [
        (None, e, 0.5, "decay") for e in sorted((edges["ab"].pk, edges["bc"].pk))
    ]
    assert all(c["block"] for c in detail["changes"]) and detail["changes"][0]["after"] == pytest.approx(0.475)
    assert api(rita).get(f"/api/batches/{decayed.batch_id}/changes/?limit=1").data["count"] == 2
    # The dashboard shows the same changes on the batch page and on the edge's own history.
    client.force_login(rita)
    page = client.get(f"/g/{acme_graph.pk}/batches/{decayed.batch_id}/").content.decode()
    assert page.count("0.475") >= 2
    edge_page = client.get(f"/g/{acme_graph.pk}/edges/{edges['ab'].pk}/").content.decode()
    assert f"batch {decayed.batch_id} (decay)" in edge_page
