"""Bad input is a 400 that names the field, and nothing is written."""

import json

import pytest
from django.conf import settings

from graphadmin.models import AuditEvent, Edge, Node, PolicyRevision


def _snapshot():
    return (Node.objects.count(), Edge.objects.count(), PolicyRevision.objects.count(), AuditEvent.objects.count())


def _post_raw(client, url, body: str, method="post"):
    return getattr(client, method)(url, body, content_type="application/json")


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"key": "x", "title": "X", "feedback_weight": 1.5}', "feedback_weight"),
        ('{"key": "x", "title": "X", "feedback_weight": -0.1}', "feedback_weight"),
        ('{"key": "x", "title": "X", "feedback_weight": NaN}', "feedback_weight"),
        ('{"key": "x", "title": "X", "feedback_weight": Infinity}', "feedback_weight"),
        ('{"key": "x", "title": "X", "embedding": [0.1, 0.2]}', "embedding"),
        ('{"key": "x", "title": "X", "embedding": [NaN' + ", 0.0" * (settings.EMBEDDING_DIM - 1) + "]}", "embedding"),
        ('{"key": "a", "title": "dup"}', "key"),
        ('{"title": "no key"}', "key"),
    ],
)
def test_bad_node(api, acme_graph, small_graph, oscar, body, field):
    before = _snapshot()
    response = _post_raw(api(oscar), f"/api/graphs/{acme_graph.pk}/nodes/", body)
    assert response.status_code == 400 and field in response.json(), response.content
    assert _snapshot() == before


def test_good_node_with_embedding(api, acme_graph, oscar):
    vec = [0.0] * settings.EMBEDDING_DIM
    vec[3] = 1.0
    response = api(oscar).post(
        f"/api/graphs/{acme_graph.pk}/nodes/", {"key": "v", "title": "V", "embedding": vec}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert list(Node.objects.get(key="v").embedding)[3] == 1.0


def _edge(small_graph, **over):
    body = {"source": small_graph["c"].pk, "target": small_graph["a"].pk, "edge_type": "related", "weight": 0.5}
    body.update(over)
    return body


@pytest.mark.parametrize(
    "over, field",
    [
        ({"weight": 1.01}, "weight"),
        ({"weight": "NaN"}, "weight"),
        ({"feedback_weight": 2}, "feedback_weight"),
        ({"edge_type": "no_such_type"}, "edge_type"),
        ({"source": 999999}, "source"),
        ({"triplet_embedding": [1.0] * 3}, "triplet_embedding"),
    ],
)
def test_bad_edge(api, acme_graph, small_graph, oscar, over, field):
    before = _snapshot()
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/edges/", _edge(small_graph, **over), format="json")
    assert response.status_code == 400 and field in response.json(), response.content
    assert _snapshot() == before


def test_edge_whose_end_is_in_another_graph(api, acme_graph, small_graph, globex_graph, oscar):
    foreign = Node.objects.create(graph=globex_graph, key="f", title="F")
    before = _snapshot()
    response = api(oscar).post(
        f"/api/graphs/{acme_graph.pk}/edges/", _edge(small_graph, target=foreign.pk), format="json"
    )
    assert response.status_code == 400 and "target" in response.json()
    assert _snapshot() == before


def test_duplicate_edge(api, acme_graph, small_graph, oscar):
    body = _edge(small_graph, source=small_graph["a"].pk, target=small_graph["b"].pk)
    response = api(oscar).post(f"/api/graphs/{acme_graph.pk}/edges/", body, format="json")
    assert response.status_code == 400 and "already exists" in json.dumps(response.json())


def test_edge_weights_are_not_editable_through_crud(api, acme_graph, small_graph, oscar):
    edge = Edge.objects.filter(graph=acme_graph).first()
    api(oscar).patch(f"/api/graphs/{acme_graph.pk}/edges/{edge.pk}/", {"weight": 0.99}, format="json")
    edge.refresh_from_db()
    assert edge.weight == 0.5


@pytest.mark.parametrize(
    "body, field",
    [
        ('{"learning_rate": 0.9}', "learning_rate"),
        ('{"learning_rate": 0.001}', "learning_rate"),
        ('{"decay_rate": NaN}', "decay_rate"),
        ('{"ema_alpha": Infinity}', "ema_alpha"),
        ('{"ceiling_mode": "hard"}', "ceiling_mode"),
        ('{"max_hops": 9}', "max_hops"),
        ('{"feedback_influence": "lots"}', "feedback_influence"),
        ('{"learning_rate": 0.2, "weight_floor": 0.9}', "weight_floor"),
    ],
)
def test_bad_policy(api, acme_graph, oscar, body, field):
    before = _snapshot()
    response = _post_raw(api(oscar), f"/api/graphs/{acme_graph.pk}/policy/", body, method="patch")
    assert response.status_code == 400 and field in response.json(), response.content
    assert _snapshot() == before


def test_bad_priority(api, acme_graph, oscar):
    from graphadmin.models import EdgeType

    et = EdgeType.objects.get(graph=acme_graph, name="related")
    before = _snapshot()
    response = _post_raw(
        api(oscar), f"/api/graphs/{acme_graph.pk}/edge-types/{et.pk}/", '{"priority": 3}', method="patch"
    )
    assert response.status_code == 400 and "priority" in response.json()
    assert _snapshot() == before


def test_malformed_json(api, acme_graph, oscar):
    response = _post_raw(api(oscar), f"/api/graphs/{acme_graph.pk}/nodes/", '{"key": ')
    assert response.status_code == 400
