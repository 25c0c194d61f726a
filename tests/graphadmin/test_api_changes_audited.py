"""Priority and policy changes are validated, versioned and audited with before and after."""

from graphadmin import audit
from graphadmin.models import AuditEvent, EdgeType, PolicyRevision


def test_priority_change_is_audited(api, acme_graph, oscar):
    et = EdgeType.objects.get(graph=acme_graph, name="depends_on")
    response = api(oscar).patch(f"/api/graphs/{acme_graph.pk}/edge-types/{et.pk}/", {"priority": 0.4}, format="json")
    assert response.status_code == 200, response.json()
    event = AuditEvent.objects.get(action="edgetype.priority.update")
    assert event.payload == {"edge_type": "depends_on", "before": 0.0, "after": 0.4}
    assert event.actor == "user:oscar" and event.scope["graph"] == acme_graph.pk
    assert audit.verify(acme_graph.organization).ok


def test_policy_change_writes_a_revision_and_keeps_the_old(api, acme_graph, oscar):
    url = f"/api/graphs/{acme_graph.pk}/policy/"
    response = api(oscar).patch(
        url, {"learning_rate": 0.2, "ceiling_mode": "normalize", "note": "faster"}, format="json"
    )
    assert response.status_code == 201, response.json()
    assert response.json()["revision"] == 2 and response.json()["learning_rate"] == 0.2
    revs = PolicyRevision.objects.filter(graph=acme_graph).order_by("revision")
    assert [(r.revision, r.learning_rate) for r in revs] == [(1, 0.1), (2, 0.2)]
    assert revs[1].ema_alpha == 0.1  # untouched values carried over
    event = AuditEvent.objects.get(action="policy.update")
    assert event.payload["changes"]["learning_rate"] == {"before": 0.1, "after": 0.2}
    assert event.payload["changes"]["ceiling_mode"] == {"before": "soft", "after": "normalize"}
    assert api(oscar).get(url).json()["revision"] == 2
    assert len(api(oscar).get(url + "revisions/").json()["results"]) == 2
