"""The report endpoints: 202 and the task runs once the request commits; the batch shows the result."""

import pytest

from feedback.models import AgentSession, UpdateBatch, UseEvent
from tests.conftest import queued_work

from .conftest import make_session, reload, url

pytestmark = pytest.mark.django_db


def test_uses_by_node_id_and_edge_triplet(
    api, ada, acme_graph, surfaced, edges, small_graph, eager_tasks, django_capture_on_commit_callbacks
):
    body = {
        "items": [
            {"node": small_graph["c"].pk},
            {
                "edge": {"source": small_graph["a"].pk, "target": small_graph["b"].pk, "type": "related"},
                "signal": "negative",
            },
        ]
    }
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api(ada).post(url(acme_graph, "s1", "uses"), body, format="json")
    assert response.status_code == 202, response.data
    assert response.data["status"] == "queued" and len(queued_work(callbacks)) == 1
    assert reload(edges["ab"]).weight == pytest.approx(0.45)
    assert reload(small_graph["c"]).feedback_weight == pytest.approx(0.55)
    batch = UpdateBatch.objects.get()
    assert batch.idempotency_key == response.data["idempotency_key"] and batch.trigger_user == ada


def test_client_idempotency_key_applies_once(
    api, ada, acme_graph, surfaced, edges, eager_tasks, django_capture_on_commit_callbacks
):
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            response = api(ada).post(
                url(acme_graph, "s1", "uses"),
                {"items": [{"edge": edges["ab"].pk}]},
                format="json",
                HTTP_IDEMPOTENCY_KEY="agent-retry-1",
            )
        assert response.status_code == 202
    assert UpdateBatch.objects.count() == 1 and UseEvent.objects.count() == 1
    assert reload(edges["ab"]).weight == pytest.approx(0.55)


def test_outcome_202_then_duplicate_200(
    api, ada, acme_graph, surfaced, edges, eager_tasks, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted", "alpha": 0.2}, format="json")
    assert response.status_code == 202 and response.data["status"] == "queued"
    assert reload(edges["ab"]).feedback_weight == pytest.approx(0.6)
    batch = UpdateBatch.objects.get(kind="outcome")
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        again = api(ada).post(url(acme_graph, "s1", "outcome"), {"outcome": "accepted"}, format="json")
    assert again.status_code == 200 and again.data == {"status": "duplicate", "batch": batch.pk}
    assert not queued_work(callbacks)


@pytest.mark.parametrize(
    "setup, status",
    [
        ("unknown", "unknown_session"),
        ("bare", "no_injection"),
        ("cut", "nothing_surfaced"),
        ("off", "feedback_disabled"),
    ],
)
def test_outcome_fall_throughs_answer_a_clear_status(
    setup, status, api, ada, acme_graph, small_graph, django_capture_on_commit_callbacks
):
    external_id = "x"
    if setup == "bare":
        AgentSession.objects.create(graph=acme_graph, external_id="x", owner=ada)
    elif setup == "cut":
        make_session(acme_graph, "x", [(small_graph["a"], None, False)], ada)
    elif setup == "off":
        acme_graph.feedback_enabled = False
        acme_graph.save()
    with django_capture_on_commit_callbacks() as callbacks:
        response = api(ada).post(url(acme_graph, external_id, "outcome"), {"outcome": "accepted"}, format="json")
    assert response.status_code == 202 and response.data["status"] == status and response.data["reason"]
    assert not queued_work(callbacks) and not UpdateBatch.objects.exists()


def test_response_text_detects_implicit_uses(
    api, ada, acme_graph, small_graph, edges, eager_tasks, django_capture_on_commit_callbacks
):
    n = small_graph
    type(n["b"]).objects.filter(pk=n["b"].pk).update(
        title="Postgres vacuum tuning", text="Autovacuum scale factor lowered for hot tables."
    )
    type(n["c"]).objects.filter(pk=n["c"].pk).update(
        title="Kafka retention", text="Topic retention set to seven days for audit streams."
    )
    make_session(acme_graph, "r1", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)], ada)
    text = "I lowered the autovacuum scale factor on the hot tables, per the Postgres vacuum tuning note."
    with django_capture_on_commit_callbacks(execute=True):
        response = api(ada).post(url(acme_graph, "r1", "response"), {"response": text}, format="json")
    assert response.status_code == 202
    assert set(UseEvent.objects.values_list("signal", "node_id", "edge_id")) == {
        ("implicit", n["b"].pk, None),
        ("implicit", None, edges["ab"].pk),
    }
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert reload(edges["bc"]).weight == 0.5


def test_decay_and_normalize_endpoints_enqueue_for_operators(
    api, oscar, acme_graph, edges, eager_tasks, django_capture_on_commit_callbacks
):
    type(edges["ab"]).objects.filter(pk=edges["ab"].pk).update(weight=0.25)
    with django_capture_on_commit_callbacks(execute=True):
        response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/normalize/")
    assert response.status_code == 202
    assert reload(edges["ab"]).weight == pytest.approx(0.5)
    with django_capture_on_commit_callbacks(execute=True):
        assert api(oscar).post(f"/api/graphs/{acme_graph.pk}/decay/").status_code == 202


def test_manual_weights(api, oscar, acme_graph, edges, small_graph):
    body = {
        "values": [
            {"edge": edges["ab"].pk, "field": "weight", "value": 0.8},
            {"node": small_graph["a"].pk, "field": "feedback_weight", "value": 0.3},
        ],
        "reason": "expert",
    }
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/weights/", body, format="json")
    assert response.status_code == 200 and response.data["edge_updates"] == 1 and response.data["node_updates"] == 1
    assert reload(edges["ab"]).weight == 0.8 and UpdateBatch.objects.get().details["reason"] == "expert"
