"""POST /api/graphs/{id}/whatif/: replay frozen candidates under a draft policy; writes nothing."""

import pytest

from feedback.models import ContextInjection, InjectionCandidate, UseEvent
from graphadmin.models import AuditEvent, EdgeType, NodeStats, PolicyRevision

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/whatif/"


@pytest.fixture
def injections(rg, api, ada):
    client = api(ada)  # the agent logs the injections; what-if is a read (reviewers and up)
    ids = []
    for session in ("s1", "s2"):
        r = client.post(
            f"/api/graphs/{rg['graph'].pk}/context/",
            {"session": session, "query": "ranking weights", "start_nodes": [rg["nodes"]["a"].pk], "budget": 2, "k": 1},
            format="json",
        )
        ids.append(r.json()["injection"])
    return ids


def _snapshot():
    return (
        ContextInjection.objects.count(),
        InjectionCandidate.objects.count(),
        PolicyRevision.objects.count(),
        AuditEvent.objects.count(),
        list(EdgeType.objects.order_by("id").values_list("priority", flat=True)),
        list(NodeStats.objects.order_by("node_id").values_list("surfaced_count", flat=True)),
    )


def test_same_policy_changes_nothing(rg, injections, api, rita):
    body = api(rita).post(url(rg["graph"]), {}, format="json").json()
    agg = body["aggregate"]
    assert (
        agg["injections"] == 2
        and agg["top1_flips"] == 0
        and agg["mean_kendall_tau"] == 1.0
        and agg["candidates_moved"] == 0
    )


def _order(injection_id):
    return [f"node:{c.node_id}" for c in InjectionCandidate.objects.filter(injection_id=injection_id).order_by("rank")]


def test_a_draft_priority_flips_top1_and_writes_nothing(rg, injections, api, rita):
    before = _snapshot()
    r = api(rita).post(
        url(rg["graph"]),
        {"edge_type_priorities": {"derived_from": 1.0}, "policy": {"coef_priority": 2.0}, "n": 1},
        format="json",
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert _snapshot() == before
    assert body["aggregate"]["injections"] == 1 and body["aggregate"]["top1_flips"] == 1
    inj = body["injections"][0]
    assert inj["injection"] == injections[-1]  # the most recent first
    d = f"node:{rg['nodes']['d'].pk}"  # reached from the start node a along a -derived_from-> d
    order = _order(injections[-1])
    assert inj["top1_current"] == order[0] != d and inj["top1_draft"] == d
    assert inj["changes"][0] == {"id": d, "before": order.index(d) + 1, "after": 1, "delta": order.index(d)}
    assert inj["kendall_tau"] < 1.0


def test_used_items_give_mrr_and_hit_at_k(rg, injections, api, rita):
    inj = ContextInjection.objects.get(pk=injections[0])
    UseEvent.objects.create(
        graph=rg["graph"], session=inj.session, injection=inj, node=rg["nodes"]["d"], signal="explicit"
    )
    UseEvent.objects.create(
        graph=rg["graph"], session=inj.session, injection=inj, node=rg["nodes"]["c"], signal="negative"
    )
    body = (
        api(rita)
        .post(
            url(rg["graph"]),
            {"edge_type_priorities": {"derived_from": 1.0}, "policy": {"coef_priority": 2.0}, "k": 1},
            format="json",
        )
        .json()
    )
    row = next(i for i in body["injections"] if i["injection"] == inj.pk)
    d = f"node:{rg['nodes']['d'].pk}"
    assert row["used"] == [d]  # the negative signal is not a use
    assert row["mrr_current"] == pytest.approx(1 / (_order(inj.pk).index(d) + 1)) and row["mrr_draft"] == 1.0
    assert row["hit_current"] == 0.0 and row["hit_draft"] == 1.0
    agg = body["aggregate"]
    assert agg["injections_with_uses"] == 1 and agg["mrr_draft"] == 1.0 and agg["hit_at_k_current"] == 0.0


@pytest.mark.parametrize(
    "body,field",
    [
        ({"n": 0}, "n"),
        ({"n": 201}, "n"),
        ({"policy": {"coef_weight": -1}}, "policy"),
        ({"policy": {"learning_rat": 0.2}}, "policy"),
        ({"policy": {"learning_rate": 0.9}}, "policy"),
        ({"since": "2026-02-01", "until": "2026-01-01"}, "until"),
        ({"agent": "nobody"}, "agent"),
        ({"edge_type_priorities": {"related": 2.0}}, "edge_type_priorities"),
        ({"edge_type_priorities": {"nope": 0.5}}, "edge_type_priorities"),
    ],
)
def test_bad_draft_is_a_400(rg, injections, api, rita, body, field):
    r = api(rita).post(url(rg["graph"]), body, format="json")
    assert r.status_code == 400 and field in r.json(), r.content


def test_whatif_tenancy_and_query_count(rg, injections, api, rita, mallory, django_assert_max_num_queries):
    assert api(mallory).post(url(rg["graph"]), {}, format="json").status_code == 404
    client = api(rita)
    # savepoint/release, graph, role, policy, edge types, injections, candidates, uses
    with django_assert_max_num_queries(9):
        assert client.post(url(rg["graph"]), {"n": 50}, format="json").status_code == 200


def test_injections_replay_with_their_frozen_factors(rg, api, rita, ada):
    client = api(rita)
    r = api(ada).post(
        f"/api/graphs/{rg['graph'].pk}/context/",
        {"session": "h", "query": "ranking weights", "anchors": [rg["nodes"]["g"].pk], "budget": 2, "k": 8},
        format="json",
    )
    assert r.status_code == 201 and r.json()["mode"] == "retrieve"
    same = client.post(url(rg["graph"]), {"n": 1}, format="json").json()["injections"][0]
    assert same["mode"] == "retrieve" and not same["top1_flip"] and same["kendall_tau"] == 1.0
    # Proximity only: the anchor itself (hop 0) must come first.
    body = client.post(
        url(rg["graph"]),
        {
            "n": 1,
            "policy": {
                "coef_vector": 0,
                "coef_persona": 0,
                "coef_recency": 0,
                "coef_path": 0,
                "coef_priority": 0,
                "coef_hop": 1,
            },
        },
        format="json",
    ).json()
    assert body["injections"][0]["top1_draft"] == f"node:{rg['nodes']['g'].pk}"
