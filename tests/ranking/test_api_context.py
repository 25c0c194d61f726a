"""POST /api/graphs/{id}/context/: budgeted best-first assembly, logged with every candidate, counters set-based."""

import pytest

from feedback.models import AgentSession, ContextInjection, InjectionCandidate
from graphadmin.models import EdgeStats, NodeStats
from ranking import scoring

pytestmark = pytest.mark.django_db


def url(graph):
    return f"/api/graphs/{graph.pk}/context/"


def post(client, rg, **body):
    return client.post(url(rg["graph"]), {"session": "sess-1", "query": "ranking weights", **body}, format="json")


def test_items_budget_selects_best_first_and_logs_every_candidate(rg, api, rita):
    n, e = rg["nodes"], rg["edges"]
    r = post(api(rita), rg, start_nodes=[n["a"].pk], budget=3)
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["session_created"] and body["mode"] == "traversal" and body["budget"] == 3 and body["spent"] == 3
    assert [i["key"] for i in body["items"]] == ["b", "e", "c"]  # e is reached through b before c is taken
    assert body["items"][0]["text"].startswith("Edges are ranked") and body["items"][0]["edge_type"] == "related"

    inj = ContextInjection.objects.get(pk=body["injection"])
    assert inj.session.external_id == "sess-1" and inj.policy_revision.revision == 1 and inj.mode == "traversal"
    cands = list(InjectionCandidate.objects.filter(injection=inj).order_by("rank"))
    assert [(c.edge_id, c.selected, c.features["cut"]) for c in cands] == [
        (e["a>b"].pk, True, ""), (e["b>e"].pk, True, ""), (e["a>c"].pk, True, ""),
        (e["c>e"].pk, False, "duplicate"), (e["a>d"].pk, False, "budget"),
    ]
    for c in cands:
        assert set(c.components) == {"weight", "semantic", "priority"}
        assert c.total == pytest.approx(sum(x["contribution"] for x in c.components.values()))
        assert c.features["edge_type"] and "weight" in c.features and c.graph_id == rg["graph"].pk


def test_tokens_budget_stops_at_the_first_item_that_does_not_fit(rg, api, rita):
    n = rg["nodes"]
    tokens = {k: scoring.estimate_tokens(v.title + "\n" + v.text) for k, v in n.items()}
    budget = tokens["b"] + tokens["e"] + tokens["c"] - 1  # c no longer fits
    body = post(api(rita), rg, start_nodes=[n["a"].pk], budget_unit="tokens", budget=budget).json()
    assert [i["key"] for i in body["items"]] == ["b", "e"]
    assert body["spent"] == tokens["b"] + tokens["e"] and body["budget_unit"] == "tokens"
    assert [i["tokens"] for i in body["items"]] == [tokens["b"], tokens["e"]]


def test_default_budget_comes_from_the_policy(rg, api, rita):
    body = post(api(rita), rg, start_nodes=[rg["nodes"]["a"].pk]).json()
    assert body["budget"] == 10 and len(body["items"]) == 4  # b, e, c, d: all distinct targets


def test_counters_are_bumped_for_selected_items_only(rg, api, rita):
    n, e = rg["nodes"], rg["edges"]
    client = api(rita)
    post(client, rg, start_nodes=[n["a"].pk], budget=2)
    post(client, rg, session="sess-2", start_nodes=[n["a"].pk], budget=1)
    assert NodeStats.objects.get(node=n["b"]).surfaced_count == 2
    assert NodeStats.objects.get(node=n["b"]).traversed_count == 2
    assert NodeStats.objects.get(node=n["e"]).surfaced_count == 1
    assert not NodeStats.objects.filter(node__in=[n["c"], n["d"]]).exists()
    stats = EdgeStats.objects.get(edge=e["a>b"])
    assert stats.traversed_count == 2 and stats.last_traversed_at is not None and stats.graph_id == rg["graph"].pk
    assert not EdgeStats.objects.filter(edge=e["c>e"]).exists()


def test_existing_session_is_reused(rg, api, rita):
    client = api(rita)
    assert post(client, rg, start_nodes=[rg["nodes"]["a"].pk]).json()["session_created"]
    assert not post(client, rg, start_nodes=[rg["nodes"]["a"].pk]).json()["session_created"]
    assert AgentSession.objects.filter(graph=rg["graph"]).count() == 1
    assert ContextInjection.objects.filter(graph=rg["graph"]).count() == 2


def test_hybrid_mode_without_start_nodes(rg, api, rita):
    r = post(api(rita), rg, anchors=[rg["nodes"]["a"].pk], budget=2, k=5)
    body = r.json()
    assert r.status_code == 201 and body["mode"] == "hybrid" and len(body["items"]) == 2 and body["considered"] == 5
    cands = InjectionCandidate.objects.filter(injection_id=body["injection"]).order_by("rank")
    assert all(c.edge_id is None for c in cands)
    assert set(cands[0].components) == {"vector", "hop", "persona", "recency"}
    assert {"vector", "hops", "age_days", "persona"} <= set(cands[0].features)
    assert NodeStats.objects.get(node_id=body["items"][0]["node"]).traversed_count == 0  # surfaced, not traversed


@pytest.mark.parametrize(
    "body,field",
    [
        ({"start_nodes": [987654]}, "start_nodes"),
        ({"start_nodes": [], "query": ""}, "start_nodes"),
        ({"budget": 201}, "budget"),
        ({"budget": 0}, "budget"),
        ({"budget_unit": "tokens", "budget": 100001}, "budget"),
        ({"budget_unit": "words"}, "budget_unit"),
        ({"hops": 3}, "hops"),
        ({"session": ""}, "session"),
        ({"vector": [0.5] * 12}, "vector"),
    ],
)
def test_bad_input_writes_nothing(rg, api, rita, body, field):
    payload = {"start_nodes": [rg["nodes"]["a"].pk], **body}
    r = post(api(rita), rg, **payload)
    assert r.status_code == 400 and field in r.json(), r.content
    assert not AgentSession.objects.exists() and not ContextInjection.objects.exists()
    assert not NodeStats.objects.exists() and not EdgeStats.objects.exists()


def test_other_org_is_404_and_writes_nothing(rg, api, mallory):
    r = post(api(mallory), rg, start_nodes=[rg["nodes"]["a"].pk])
    assert r.status_code == 404 and not AgentSession.objects.exists()


def test_context_query_count_does_not_grow_with_candidates(rg, api, rita, django_assert_max_num_queries):
    client = api(rita)
    # savepoints of the request, the service and get_or_create (6); graph, role, policy, node check, candidates,
    # session get + insert, injection, node stats, edge stats, texts (11); the candidates go in one COPY.
    with django_assert_max_num_queries(18):
        small = post(client, rg, session="q1", start_nodes=[rg["nodes"]["a"].pk], hops=1)
    with django_assert_max_num_queries(18):
        large = post(client, rg, session="q2", start_nodes=[rg["nodes"]["a"].pk], hops=2)
    assert small.json()["considered"] == 3 and large.json()["considered"] == 5
