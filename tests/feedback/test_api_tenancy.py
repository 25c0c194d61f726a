"""Tenancy (another organization's graph, session or batch is a 404) and roles (403) on every feedback endpoint."""

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import UpdateBatch
from tests.conftest import queued_work

from .conftest import url

pytestmark = pytest.mark.django_db


@pytest.fixture
def batch(oscar, surfaced, edges):
    return UpdateBatch.objects.get(
        pk=actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar).batch_id
    )


def test_outsider_gets_404_everywhere(api, mallory, acme_graph, surfaced, batch, django_capture_on_commit_callbacks):
    client = api(mallory)
    with django_capture_on_commit_callbacks() as callbacks:
        for what, body in (
            ("uses", {"items": [{"node": 1}]}),
            ("response", {"response": "x"}),
            ("outcome", {"outcome": "accepted"}),
        ):
            assert client.post(url(acme_graph, "s1", what), body, format="json").status_code == 404
        for path in ("decay", "normalize", "weights"):
            assert client.post(f"/api/graphs/{acme_graph.pk}/{path}/", {}, format="json").status_code == 404
        assert client.get(f"/api/graphs/{acme_graph.pk}/metrics/").status_code == 404
        assert client.get(f"/api/batches/{batch.pk}/").status_code == 404
        assert client.get(f"/api/batches/{batch.pk}/changes/").status_code == 404
        assert client.post(f"/api/batches/{batch.pk}/rollback/", {}, format="json").status_code == 404
        assert client.get("/api/batches/").data["count"] == 0
    assert not queued_work(callbacks)
    assert UpdateBatch.objects.get(pk=batch.pk).status == "applied"


def test_reviewer_reads_but_may_not_report(api, rita, acme_graph, surfaced, batch):
    client = api(rita)
    assert client.post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json").status_code == 403
    assert client.post(url(acme_graph, "s1", "uses"), {"items": [{"node": 1}]}, format="json").status_code == 403
    assert client.get(f"/api/batches/{batch.pk}/").status_code == 200
    assert client.get(f"/api/graphs/{acme_graph.pk}/metrics/").status_code == 200


def test_analyst_may_not_operate(api, ana, acme_graph, surfaced, batch):
    client = api(ana)
    assert client.post(f"/api/batches/{batch.pk}/rollback/", {}, format="json").status_code == 403
    for path in ("decay", "normalize", "weights"):
        assert client.post(f"/api/graphs/{acme_graph.pk}/{path}/", {}, format="json").status_code == 403
    assert UpdateBatch.objects.get(pk=batch.pk).status == "applied"


def test_anonymous_is_refused(api, acme_graph, batch):
    assert api().get("/api/batches/").status_code == 401
    assert api().post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json").status_code == 401


def test_an_agent_reads_only_the_batches_of_its_own_sessions(api, ada, abe, rita, batch):
    """Batch ``batch`` came from ada's session s1: ada (and every reviewer) reads it, the agent abe does not."""
    assert api(ada).get(f"/api/batches/{batch.pk}/").status_code == 200
    assert [b["id"] for b in api(ada).get("/api/batches/").data["results"]] == [batch.pk]
    assert api(abe).get(f"/api/batches/{batch.pk}/").status_code == 404
    assert api(abe).get("/api/batches/").data["count"] == 0
    assert api(rita).get("/api/batches/").data["count"] == 1
