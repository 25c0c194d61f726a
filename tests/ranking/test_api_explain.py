"""GET /api/injections/{id}/explain/: every candidate's components, and why rank i beat rank j."""

import math

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def injection(rg, api, rita):
    r = api(rita).post(
        f"/api/graphs/{rg['graph'].pk}/context/",
        {"session": "s", "query": "ranking weights", "start_nodes": [rg["nodes"]["a"].pk], "budget": 3},
        format="json",
    )
    return r.json()["injection"]


def test_explain_lists_every_candidate_with_components(injection, api, rita):
    body = api(rita).get(f"/api/injections/{injection}/explain/").json()
    assert body["mode"] == "traversal" and body["policy_revision"] == 1 and body["comparison"] is None
    assert [c["rank"] for c in body["candidates"]] == [1, 2, 3, 4, 5]
    assert [c["selected"] for c in body["candidates"]] == [True, True, True, False, False]
    assert all(set(c["components"]) == {"weight", "semantic", "priority"} for c in body["candidates"])


def test_explain_pair_gives_the_component_differences_largest_first(injection, api, rita):
    body = api(rita).get(f"/api/injections/{injection}/explain/?i=1&j=5").json()
    comp = body["comparison"]
    by_rank = {c["rank"]: c for c in body["candidates"]}
    assert comp["difference"] == pytest.approx(by_rank[1]["total"] - by_rank[5]["total"])
    diffs = [row["difference"] for row in comp["components"]]
    assert diffs == sorted(diffs, reverse=True)
    assert math.fsum(diffs) == pytest.approx(comp["difference"])
    weight = next(row for row in comp["components"] if row["component"] == "weight")
    # a>b (w .9) vs a>d (w .3), feedback .5 each: 0.5 * (0.78 - 0.36)
    assert weight["difference"] == pytest.approx(0.21) and comp["components"][0]["component"] == "weight"


@pytest.mark.parametrize("query,field", [("?i=1", "j"), ("?i=1&j=99", "j"), ("?i=0&j=1", "i"), ("?i=a&j=1", "i")])
def test_explain_bad_ranks_are_400(injection, api, rita, query, field):
    r = api(rita).get(f"/api/injections/{injection}/explain/{query}")
    assert r.status_code == 400 and field in r.json()


def test_explain_is_404_for_another_organization(injection, api, mallory):
    assert api(mallory).get(f"/api/injections/{injection}/explain/").status_code == 404


def test_explain_query_count_is_constant(injection, api, rita, django_assert_max_num_queries):
    client = api(rita)
    with django_assert_max_num_queries(4):  # injection (with session, policy; tenancy), candidates
        assert client.get(f"/api/injections/{injection}/explain/?i=1&j=2").status_code == 200
