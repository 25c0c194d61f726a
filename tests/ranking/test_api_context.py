"""POST /api/graphs/{id}/context/: budgeted best-first assembly, logged with every candidate, counters set-based."""

import math

import pytest

from feedback.models import AgentSession, ContextInjection, InjectionCandidate
from graphadmin.models import EdgeStats, NodeStats

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/context/"


def post(client, rg, **body):
    return client.post(url(rg["graph"]), {"session": "sess-1", "query": "ranking weights", **body}, format="json")


def test_items_budget_selects_best_first_and_logs_every_candidate(rg, api, ada):
    n = rg["nodes"]
    r = post(api(ada), rg, start_nodes=[n["a"].pk], budget=3)
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["session_created"] and body["mode"] == "retrieve" and body["budget"] == 3 and body["spent"] == 3
    assert [i["rank"] for i in body["items"]] == [1, 2, 3]
    assert body["items"][0]["text"] and {"entry", "path", "edge", "edge_type"} <= set(body["items"][0])

    inj = ContextInjection.objects.get(pk=body["injection"])
    assert inj.session.external_id == "sess-1" and inj.policy_revision.revision == 1 and inj.mode == "retrieve"
    assert inj.query_embedding is not None
    cands = list(InjectionCandidate.objects.filter(injection=inj).order_by("rank"))
    assert len(cands) == body["considered"] and [c.selected for c in cands][:3] == [True] * 3
    assert {c.features["cut"] for c in cands[3:]} <= {"budget"} and all(not c.selected for c in cands[3:])
    assert [c.total for c in cands] == sorted((c.total for c in cands), reverse=True)
    assert {c.node_id for c in cands} == {n[k].pk for k in "abcdefg"}  # never the archived x
    for c in cands:
        assert set(c.components) == {
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
        assert c.total == pytest.approx(sum(x["contribution"] for x in c.components.values()))
        assert (
            c.features["entry"] in ("start", "vector", "lexical", "triplet", "expansion")
            and c.graph_id == rg["graph"].pk
        )


def test_tokens_budget_stops_at_the_first_item_that_does_not_fit(rg, api, ada):
    n = rg["nodes"]
    tokens = {v.pk: max(1, math.ceil(len(v.title + "\n" + v.text) / 4)) for v in n.values()}  # docs/ranking.md
    client = api(ada)
    ranked = [i["node"] for i in post(client, rg, session="probe", start_nodes=[n["a"].pk], budget=20).json()["items"]]
    budget = tokens[ranked[0]] + tokens[ranked[1]] + tokens[ranked[2]] - 1  # the third no longer fits
    body = post(client, rg, start_nodes=[n["a"].pk], budget_unit="tokens", budget=budget).json()
    assert [i["node"] for i in body["items"]] == ranked[:2]
    assert body["spent"] == tokens[ranked[0]] + tokens[ranked[1]] and body["budget_unit"] == "tokens"


def test_default_budget_comes_from_the_policy(rg, api, ada):
    body = post(api(ada), rg, start_nodes=[rg["nodes"]["a"].pk]).json()
    assert body["budget"] == 10 and len(body["items"]) == 7  # a..g: every active node, each once


def test_counters_are_bumped_for_selected_items_only(rg, api, ada):
    client = api(ada)
    first = post(client, rg, budget=2).json()["items"]
    second = post(client, rg, session="sess-2", budget=1).json()["items"]
    assert second[0]["node"] == first[0]["node"]
    assert NodeStats.objects.get(node_id=first[0]["node"]).surfaced_count == 2
    assert NodeStats.objects.get(node_id=first[1]["node"]).surfaced_count == 1
    assert NodeStats.objects.filter(graph=rg["graph"]).count() == 2
    # Edges on the selected items' paths are traversed (decay spares them); no other edge is counted.
    path_edges = {e for item in first + second for e in item["path"]}
    assert set(EdgeStats.objects.values_list("edge_id", flat=True)) == path_edges
    for stats in EdgeStats.objects.all():
        assert stats.traversed_count >= 1 and stats.last_traversed_at is not None and stats.graph_id == rg["graph"].pk


def test_existing_session_is_reused(rg, api, ada):
    client = api(ada)
    assert post(client, rg, start_nodes=[rg["nodes"]["a"].pk]).json()["session_created"]
    assert not post(client, rg, start_nodes=[rg["nodes"]["a"].pk]).json()["session_created"]
    assert AgentSession.objects.filter(graph=rg["graph"]).count() == 1
    assert ContextInjection.objects.filter(graph=rg["graph"]).count() == 2


def test_question_only_with_anchors(rg, api, ada):
    r = post(api(ada), rg, anchors=[rg["nodes"]["a"].pk], budget=2, k=8)
    body = r.json()
    assert r.status_code == 201 and body["mode"] == "retrieve" and len(body["items"]) == 2
    cands = InjectionCandidate.objects.filter(injection_id=body["injection"]).order_by("rank")
    a = next(c for c in cands if c.node_id == rg["nodes"]["a"].pk)
    assert a.features["hops"] == 0  # hops are measured from the anchors
    assert {"vector", "hops", "age_days", "persona", "entry", "path"} <= set(cands[0].features)


@pytest.mark.parametrize(
    "body,field",
    [
        ({"start_nodes": [987654]}, "start_nodes"),
        ({"start_nodes": [], "query": ""}, "query"),
        ({"exclude": [0]}, "exclude"),
        ({"budget": 201}, "budget"),
        ({"budget": 0}, "budget"),
        ({"budget_unit": "tokens", "budget": 100001}, "budget"),
        ({"budget_unit": "words"}, "budget_unit"),
        ({"hops": 3}, "hops"),
        ({"hops": -1}, "hops"),
        ({"session": ""}, "session"),
        ({"vector": [0.5] * 12}, "vector"),
    ],
)
def test_bad_input_writes_nothing(rg, api, ada, body, field):
    payload = {"start_nodes": [rg["nodes"]["a"].pk], **body}
    r = post(api(ada), rg, **payload)
    assert r.status_code == 400 and field in r.json(), r.content
    assert not AgentSession.objects.exists() and not ContextInjection.objects.exists()
    assert not NodeStats.objects.exists() and not EdgeStats.objects.exists()


def test_other_org_is_404_and_writes_nothing(rg, api, mallory):
    r = post(api(mallory), rg, start_nodes=[rg["nodes"]["a"].pk])
    assert r.status_code == 404 and not AgentSession.objects.exists()


def test_context_query_count_does_not_grow_with_candidates(rg, api, ada, django_assert_max_num_queries):
    client = api(ada)
    # savepoints of the request, the service and get_or_create; graph, role, policy, node check, entry points
    # (settings, nodes, triplets), node facts, expansion, similar retrievals (settings, counts), session get +
    # insert, injection, node stats, edge stats, texts; the candidates go in one COPY.
    with django_assert_max_num_queries(26):
        small = post(client, rg, session="q1", start_nodes=[rg["nodes"]["a"].pk], hops=1, k=1)
    with django_assert_max_num_queries(26):
        large = post(client, rg, session="q2", start_nodes=[rg["nodes"]["a"].pk], hops=2, k=8)
    assert small.json()["considered"] <= large.json()["considered"] == 7


def test_traversal_stamps_take_the_simulated_clock(rg, api, ada):
    """A context call under a simulated clock (the demo history) stamps its counters with that time, so a
    decay run on the same clock sees when each edge was last traversed."""
    from datetime import UTC, datetime

    from graphadmin import clock

    at = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)
    with clock.using(clock.SimulatedClock(at)):
        items = post(api(ada), rg, query="vector search in postgres", k=1, budget=3).json()["items"]
    assert any(item["path"] for item in items)
    stamps = set(EdgeStats.objects.filter(graph=rg["graph"]).values_list("last_traversed_at", flat=True))
    assert stamps and all(abs((s - at).total_seconds()) < 1 for s in stamps)
    surfaced = set(NodeStats.objects.filter(graph=rg["graph"]).values_list("last_surfaced_at", flat=True))
    assert surfaced and all(abs((s - at).total_seconds()) < 1 for s in surfaced)


def test_context_creates_a_session_owned_by_the_caller(rg, api, ada):
    assert post(api(ada), rg, session="mine").status_code == 201
    assert AgentSession.objects.get(graph=rg["graph"], external_id="mine").owner == ada


@pytest.mark.parametrize("who", ["rita", "ana"])
def test_reviewers_and_analysts_may_not_log_context(request, rg, api, who):
    """Read only: they rank and search, but a context call writes a session and an injection log."""
    response = post(api(request.getfixturevalue(who)), rg, session="theirs")
    assert response.status_code == 403
    assert not AgentSession.objects.exists() and not ContextInjection.objects.exists()


def test_another_agent_may_not_add_context_to_a_session_an_operator_may(rg, api, ada, abe, oscar):
    """Adding retrievals to another agent's session would steer its outcome EMA and keep edges from decaying."""
    assert post(api(ada), rg, session="ada-1").status_code == 201
    stats = sorted(EdgeStats.objects.values_list("edge_id", "traversed_count"))
    refused = post(api(abe), rg, session="ada-1")
    assert refused.status_code == 403 and "belongs to another user" in refused.json()["detail"]
    assert ContextInjection.objects.filter(session__external_id="ada-1").count() == 1
    assert sorted(EdgeStats.objects.values_list("edge_id", "traversed_count")) == stats
    assert post(api(oscar), rg, session="ada-1").status_code == 201  # operators may, on any session
    session = AgentSession.objects.get(external_id="ada-1")
    assert session.owner == ada and session.injections.count() == 2


def test_hops_zero_gives_entry_points_only(rg, api, ada):
    """The ablation: hops 0 expands along no edge, so nothing selected came through one; the default does."""
    client = api(ada)
    ask = {"query": "vector search in postgres", "k": 1, "budget": 7}
    default = post(client, rg, session="h-default", **ask)
    zero = post(client, rg, session="h-zero", hops=0, **ask)
    assert default.status_code == zero.status_code == 201, (default.content, zero.content)
    assert any(i["entry"] == "expansion" for i in default.json()["items"])
    items = zero.json()["items"]
    assert items and all(i["entry"] != "expansion" for i in items)
    inj = ContextInjection.objects.get(pk=zero.json()["injection"])
    assert inj.params["hops"] == 0
    assert all(c.features["entry"] != "expansion" for c in InjectionCandidate.objects.filter(injection=inj))
