"""GET /api/injections/{id}/explain/: every candidate's components, and why rank i beat rank j."""

import math

import pytest

pytestmark = pytest.mark.django_db


@pytest.fixture
def injection(rg, api, ada):
    """An injection of the agent ada's session (reviewers read every injection of the organization)."""
    r = api(ada).post(
        f"/api/graphs/{rg['graph'].pk}/context/",
        {"session": "s", "query": "ranking weights", "start_nodes": [rg["nodes"]["a"].pk], "budget": 3},
        format="json",
    )
    return r.json()["injection"]


def test_explain_lists_every_candidate_with_components(injection, api, rita):
    body = api(rita).get(f"/api/injections/{injection}/explain/").json()
    assert body["mode"] == "retrieve" and body["policy_revision"] == 1 and body["comparison"] is None
    assert [c["rank"] for c in body["candidates"]] == list(range(1, 8))
    assert [c["selected"] for c in body["candidates"]] == [True] * 3 + [False] * 4
    assert [c["cut"] for c in body["candidates"]] == [""] * 3 + ["budget"] * 4
    names = {
        "vector",
        "lexical",
        "hop",
        "persona",
        "recency",
        "feedback",
        "path",
        "priority",
        "memory",
        "exploration",
        "graph",
    }
    assert all(set(c["components"]) == names for c in body["candidates"])
    for c in body["candidates"]:
        assert c["entry"] in ("start", "vector", "lexical", "triplet", "expansion")
        # A candidate that came along an edge says so in words: "A -type-> B ...", a link expansion walked from
        # its target (a backlink, since expansion walks links both ways) "A <-type- B": one arrow per edge.
        arrows = c["path_text"].count("->") + c["path_text"].count("<-")
        assert bool(c["path"]) == bool(c["path_text"]) and arrows == len(c["path"])


def test_explain_pair_gives_the_component_differences_largest_first(injection, api, rita):
    body = api(rita).get(f"/api/injections/{injection}/explain/?i=1&j=5").json()
    comp = body["comparison"]
    by_rank = {c["rank"]: c for c in body["candidates"]}
    assert comp["difference"] == pytest.approx(by_rank[1]["total"] - by_rank[5]["total"])
    diffs = [row["difference"] for row in comp["components"]]
    assert diffs == sorted(diffs, reverse=True)
    assert math.fsum(diffs) == pytest.approx(comp["difference"])
    for row in comp["components"]:
        assert row["difference"] == pytest.approx(
            by_rank[1]["components"][row["component"]]["contribution"]
            - by_rank[5]["components"][row["component"]]["contribution"]
        )


@pytest.mark.parametrize("query,field", [("?i=1", "j"), ("?i=1&j=99", "j"), ("?i=0&j=1", "i"), ("?i=a&j=1", "i")])
def test_explain_bad_ranks_are_400(injection, api, rita, query, field):
    r = api(rita).get(f"/api/injections/{injection}/explain/{query}")
    assert r.status_code == 400 and field in r.json()


def test_explain_is_404_for_another_organization(injection, api, mallory):
    assert api(mallory).get(f"/api/injections/{injection}/explain/").status_code == 404


def test_explain_query_count_is_constant(injection, api, rita, django_assert_max_num_queries):
    client = api(rita)
    with django_assert_max_num_queries(6):  # injection (with session, policy; tenancy), candidates, path edges, titles
        assert client.get(f"/api/injections/{injection}/explain/?i=1&j=2").status_code == 200


def test_an_agent_explains_only_its_own_sessions_injections(injection, api, ada, abe):
    assert api(ada).get(f"/api/injections/{injection}/explain/").status_code == 200
    assert api(abe).get(f"/api/injections/{injection}/explain/").status_code == 404
