"""POST /api/graphs/{id}/rank/: ranked edges with components, tenancy, validation and query count."""

import math

import pytest

from graphadmin.models import EdgeType

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/rank/"


def test_rank_returns_components_that_sum_to_the_total_in_rank_order(rg, api, rita):
    r = api(rita).post(
        url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk], "query": "ranking weights"}, format="json"
    )
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["policy_revision"] == 1 and body["considered"] == 5
    results = body["results"]
    assert [x["rank"] for x in results] == [1, 2, 3, 4, 5]
    totals = [x["total"] for x in results]
    assert totals == sorted(totals, reverse=True)
    for x in results:
        assert set(x["components"]) == {"weight", "semantic", "priority"}
        assert math.fsum(c["contribution"] for c in x["components"].values()) == pytest.approx(x["total"])
        for c in x["components"].values():
            assert c["contribution"] == pytest.approx(c["raw"] * c["coefficient"])
    first = results[0]
    assert first["target"]["key"] == "b" and first["edge_type"] == "related" and first["hops"] == 1
    # weight .9, feedback .5, influence .3 -> .78
    assert first["components"]["weight"]["raw"] == pytest.approx(0.78)
    assert {x["target"]["key"] for x in results} == {"b", "c", "d", "e"}  # never x (archived) nor f (archived edge)


def test_edge_type_priority_moves_an_edge_up(rg, api, rita):
    EdgeType.objects.filter(graph=rg["graph"], name="derived_from").update(priority=1.0)
    r = api(rita).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk], "hops": 1}, format="json")
    d = next(x for x in r.json()["results"] if x["target"]["key"] == "d")
    assert d["components"]["priority"] == {"raw": 1.0, "coefficient": 0.15, "contribution": 0.15}


def test_k_and_hops_limit_the_result(rg, api, rita):
    r = api(rita).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk], "k": 2, "hops": 1}, format="json")
    assert [x["target"]["key"] for x in r.json()["results"]] == ["b", "c"]
    assert r.json()["considered"] == 3


def test_every_member_role_may_rank(rg, api, rita, ana, oscar, alice):
    for user in (rita, ana, oscar, alice):
        assert (
            api(user).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk]}, format="json").status_code == 200
        )


def test_another_organizations_graph_is_404_and_anonymous_is_refused(rg, api, mallory, globex_graph):
    assert api(mallory).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk]}, format="json").status_code == 404
    assert api(None).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk]}, format="json").status_code == 401


def test_unknown_start_nodes_are_listed(rg, api, rita, globex_graph):
    from graphadmin.models import Node

    foreign = Node.objects.create(graph=globex_graph, key="z", title="Z")
    r = api(rita).post(url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk, foreign.pk, 987654]}, format="json")
    assert r.status_code == 400
    assert str(foreign.pk) in r.json()["start_nodes"][0] and "987654" in r.json()["start_nodes"][0]


@pytest.mark.parametrize(
    "payload,field",
    [
        ({"vector": [0.1] * 3}, "vector"),
        ({"vector": [0.0] * 384}, "vector"),
        ({"k": 0}, "k"),
        ({"k": 501}, "k"),
        ({"hops": 4}, "hops"),
        ({"hops": 3}, "hops"),  # above the policy's max_hops (2)
        ({"start_nodes": []}, "start_nodes"),
        ({"start_nodes": list(range(1, 52))}, "start_nodes"),
        ({"query": "x" * 4001}, "query"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(rg, api, rita, payload, field):
    body = {"start_nodes": [rg["nodes"]["a"].pk], **payload}
    r = api(rita).post(url(rg["graph"]), body, format="json")
    assert r.status_code == 400 and field in r.json(), r.content


def test_nan_in_raw_json_is_named(rg, api, rita):
    raw = '{"start_nodes": [' + str(rg["nodes"]["a"].pk) + '], "vector": [NaN' + ", 0.1" * 383 + "]}"
    r = api(rita).post(url(rg["graph"]), raw, content_type="application/json")
    assert r.status_code == 400 and "vector" in r.json()


def test_a_vector_gives_the_same_similarity_as_its_text(rg, api, rita):
    from graphadmin.embeddings import embed_texts

    a = rg["nodes"]["a"].pk
    by_text = api(rita).post(url(rg["graph"]), {"start_nodes": [a], "query": "edge weights"}, format="json").json()
    by_vec = (
        api(rita)
        .post(url(rg["graph"]), {"start_nodes": [a], "vector": embed_texts(["edge weights"])[0]}, format="json")
        .json()
    )
    assert [x["total"] for x in by_text["results"]] == pytest.approx([x["total"] for x in by_vec["results"]])


def test_rank_runs_a_bounded_number_of_queries(rg, api, rita, django_assert_max_num_queries):
    client = api(rita)
    # graph (tenancy), role, the graph's embedding models, policy, start-node check, candidates; savepoint and release
    # of the request's transaction.
    with django_assert_max_num_queries(8):
        r = client.post(
            url(rg["graph"]), {"start_nodes": [rg["nodes"]["a"].pk], "query": "ranking", "hops": 2}, format="json"
        )
    assert r.status_code == 200
