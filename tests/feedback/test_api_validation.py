"""Bad input is a 400 naming the field, and nothing is written or enqueued."""

import pytest

from feedback.models import UpdateBatch, UseEvent
from graphadmin.models import Edge, EdgeType, Node
from tests.conftest import queued_work

from .conftest import url

pytestmark = pytest.mark.django_db


def _post(api, user, path, body, capture):
    with capture() as callbacks:
        response = api(user).post(path, body, format="json")
    assert not queued_work(callbacks), "nothing may be enqueued for a bad request"
    assert not UpdateBatch.objects.exists() and not UseEvent.objects.exists()
    return response


@pytest.mark.parametrize(
    "body, field",
    [
        ({"outcome": "great"}, "outcome"),
        ({"outcome": "accepted", "alpha": 0.9}, "alpha"),
        ({"outcome": "accepted", "alpha": "NaN"}, "alpha"),
        ({}, "outcome"),
    ],
)
def test_outcome_bad_input(body, field, api, ada, acme_graph, surfaced, django_capture_on_commit_callbacks):
    response = _post(api, ada, url(acme_graph, "s1", "outcome"), body, django_capture_on_commit_callbacks)
    assert response.status_code == 400 and field in response.data


def test_uses_learning_rate_out_of_bounds(api, ada, acme_graph, surfaced, edges, django_capture_on_commit_callbacks):
    response = _post(
        api,
        ada,
        url(acme_graph, "s1", "uses"),
        {"items": [{"edge": edges["ab"].pk}], "learning_rate": 0.9},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 400 and "learning_rate" in response.data


def test_unknown_signal_and_empty_items(api, ada, acme_graph, surfaced, edges, django_capture_on_commit_callbacks):
    response = _post(
        api,
        ada,
        url(acme_graph, "s1", "uses"),
        {"items": [{"edge": edges["ab"].pk, "signal": "maybe"}]},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 400 and "signal" in response.data["items"][0]
    response = _post(api, ada, url(acme_graph, "s1", "uses"), {"items": []}, django_capture_on_commit_callbacks)
    assert response.status_code == 400 and "items" in response.data


def test_edge_key_that_does_not_exist(api, ada, acme_graph, surfaced, small_graph, django_capture_on_commit_callbacks):
    n = small_graph
    body = {"items": [{"node": n["a"].pk}, {"edge": {"source": n["c"].pk, "target": n["a"].pk, "type": "related"}}]}
    response = _post(api, ada, url(acme_graph, "s1", "uses"), body, django_capture_on_commit_callbacks)
    assert response.status_code == 400
    assert "Unknown edge" in str(response.data["items"][1]["edge"][0])


def test_items_from_another_graph_or_organization(
    api, ada, acme, alice, acme_graph, globex_graph, surfaced, django_capture_on_commit_callbacks
):
    from graphadmin import actions

    other = actions.do_create_graph(acme, "other", "Other acme graph", actor=alice)
    foreign_node = Node.objects.create(graph=globex_graph, key="g", title="G")
    sibling_node = Node.objects.create(graph=other, key="o", title="O")
    sibling_edge = Edge.objects.create(
        graph=other,
        source=sibling_node,
        target=sibling_node,
        edge_type=EdgeType.objects.get(graph=other, name="related"),
    )
    for item, field in (
        ({"node": foreign_node.pk}, "node"),
        ({"node": sibling_node.pk}, "node"),
        ({"edge": sibling_edge.pk}, "edge"),
    ):
        response = _post(api, ada, url(acme_graph, "s1", "uses"), {"items": [item]}, django_capture_on_commit_callbacks)
        assert response.status_code == 400 and field in response.data["items"][0]


def test_node_and_edge_in_one_item(
    api, ada, acme_graph, surfaced, edges, small_graph, django_capture_on_commit_callbacks
):
    response = _post(
        api,
        ada,
        url(acme_graph, "s1", "uses"),
        {"items": [{"node": small_graph["a"].pk, "edge": edges["ab"].pk}]},
        django_capture_on_commit_callbacks,
    )
    assert response.status_code == 400


def test_two_signals_for_one_edge(api, ada, acme_graph, surfaced, edges, django_capture_on_commit_callbacks):
    body = {"items": [{"edge": edges["ab"].pk}, {"edge": edges["ab"].pk, "signal": "negative"}]}
    response = _post(api, ada, url(acme_graph, "s1", "uses"), body, django_capture_on_commit_callbacks)
    assert response.status_code == 400 and "signal" in response.data["items"][1]


def test_manual_value_out_of_range(api, oscar, acme_graph, edges, small_graph):
    response = api(oscar).post(
        f"/api/graphs/{acme_graph.pk}/weights/",
        {"values": [{"edge": edges["ab"].pk, "field": "weight", "value": 1.5}]},
        format="json",
    )
    assert response.status_code == 400 and "value" in response.data["values"][0]
    response = api(oscar).post(
        f"/api/graphs/{acme_graph.pk}/weights/",
        {"values": [{"node": small_graph["a"].pk, "field": "weight", "value": 0.5}]},
        format="json",
    )
    assert response.status_code == 400 and "field" in response.data["values"][0]
    assert not UpdateBatch.objects.exists()


def test_metrics_bad_dates(api, ana, acme_graph):
    assert "from" in api(ana).get(f"/api/graphs/{acme_graph.pk}/metrics/?from=yesterday").data
    assert "from" in api(ana).get(f"/api/graphs/{acme_graph.pk}/metrics/?from=2026-02-01&to=2026-01-01").data
