"""The audit trail says what each event did in words (issue 25 item 6), with a link to its batch and a date filter."""

import pytest

from graphadmin import audit
from graphadmin.views import audit_summary


@pytest.mark.parametrize(
    "payload, expected",
    [
        ({"user": "ana", "role": "operator", "before": "analyst"}, "ana: analyst → operator"),
        ({"edge_type": "related", "before": 0.0, "after": 0.4}, "related: 0 → 0.4"),
        (
            {"revision": 2, "changes": {"coef_vector": {"before": 1.0, "after": 1.1}}, "note": "more similarity"},
            "coef_vector 1 → 1.1; revision 2; note more similarity",
        ),
        (
            {"batch": 7, "kind": "manual", "node_updates": 0, "edge_updates": 1, "conflicts": 0},
            "batch 7; kind manual; node_updates 0; edge_updates 1; conflicts 0",
        ),
        ({"user": "ana", "before": "operator"}, "ana: operator → —"),
    ],
)
def test_audit_summary(payload, expected):
    assert audit_summary(payload) == expected


@pytest.mark.django_db
def test_the_trail_shows_summaries_batch_links_and_filters_by_day(client, acme_graph, alice, oscar):
    from feedback import actions
    from graphadmin.models import Edge, EdgeType, Node

    related = EdgeType.objects.get(graph=acme_graph, name="related")
    a, b = (Node.objects.create(graph=acme_graph, key=k, title=k) for k in "ab")
    edge = Edge.objects.create(graph=acme_graph, source=a, target=b, edge_type=related)
    result = actions.do_set_weights(acme_graph, [actions.ManualValue("edge", edge.pk, "weight", 0.2)], actor=oscar)
    client.force_login(alice)
    page = client.get(f"/g/{acme_graph.pk}/audit/").content.decode()
    assert f'href="/g/{acme_graph.pk}/batches/{result.batch_id}/"' in page
    assert "kind manual" in page and "&quot;kind&quot;: &quot;manual&quot;" in page  # the payload as JSON
    assert "{&#x27;" not in page  # no Python repr
    assert "No events." in client.get(f"/g/{acme_graph.pk}/audit/?to=2000-01-01").content.decode()
    assert "expected a date" in client.get(f"/g/{acme_graph.pk}/audit/?from=nope").content.decode()
    assert audit.verify(acme_graph.organization).ok
