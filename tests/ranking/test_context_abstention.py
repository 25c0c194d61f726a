"""A context answer that can say "nothing relevant": confidence, abstained, vector_score; the floor in the policy,
the gate on the whole answer, the abstained injection still logged, the MCP text, what-if, tenancy and roles."""

import pytest

from feedback.models import ContextInjection, InjectionCandidate
from graphadmin import actions
from graphadmin.models import EdgeType, NodeStats, PolicyRevision
from graphadmin.models.policy import POLICY_NUMBERS
from ranking import abstention
from ranking import mcp as ranking_mcp

pytestmark = pytest.mark.django_db

ON_TOPIC = "ranking weights of edges"
OFF_TOPIC = "banana bread recipe with walnuts"


def ask(client, graph, query, session, **body):
    return client.post(f"/api/graphs/{graph.pk}/context/", {"session": session, "query": query, **body}, format="json")


def set_floor(graph, floor, actor):
    actions.do_set_policy(graph, {"abstain_floor": floor}, actor=actor, note="test floor")


@pytest.fixture
def confidences(rg, api, ada):
    """The two questions' confidences with no floor (the default): the floor set between them splits them."""
    client = api(ada)
    on = ask(client, rg["graph"], ON_TOPIC, "probe-on").json()
    off = ask(client, rg["graph"], OFF_TOPIC, "probe-off").json()
    assert not on["abstained"] and not off["abstained"]  # floor 0: never
    assert off["confidence"] < on["confidence"]
    return on["confidence"], off["confidence"]


def test_an_answer_carries_its_confidence_and_each_item_its_cosine(rg, api, ada):
    body = ask(api(ada), rg["graph"], ON_TOPIC, "s1").json()
    assert body["abstained"] is False and body["items"]
    injection = ContextInjection.objects.get(pk=body["injection"])
    cands = list(InjectionCandidate.objects.filter(injection=injection))
    by_node = {c.node_id: c for c in cands}
    for item in body["items"]:
        assert item["vector_score"] == pytest.approx(by_node[item["node"]].features["similarity"])
    # The confidence is the best entry point's match, recomputed from the logged candidates.
    expected = abstention.confidence((c.features["entry"], c.features["similarity"], c.features["bm25"]) for c in cands)
    assert body["confidence"] == pytest.approx(expected) and body["confidence"] > 0
    assert injection.params["confidence"] == body["confidence"] and injection.params["abstained"] is False
    assert injection.params["abstain_floor"] == 0.0


def test_below_the_floor_the_answer_abstains_and_is_still_logged(rg, api, ada, alice, confidences):
    on, off = confidences
    graph = rg["graph"]
    set_floor(graph, round((on + off) / 2, 4), alice)
    surfaced = dict(NodeStats.objects.filter(graph=graph).values_list("node_id", "surfaced_count"))
    client = api(ada)

    r = ask(client, graph, OFF_TOPIC, "s-off")
    assert r.status_code == 201, r.content
    body = r.json()
    assert body["abstained"] is True and body["items"] == [] and body["spent"] == 0
    assert body["confidence"] == pytest.approx(off) and body["considered"] > 0
    injection = ContextInjection.objects.get(pk=body["injection"])
    assert injection.params["abstained"] is True and injection.params["confidence"] == body["confidence"]
    assert injection.policy_revision.revision == 2 and injection.spent == 0
    cands = list(InjectionCandidate.objects.filter(injection=injection))
    assert len(cands) == body["considered"]  # every candidate kept, so that it can be learned from
    assert all(not c.selected and c.features["cut"] == "abstained" for c in cands)
    # Nothing was given: no counter moved.
    assert dict(NodeStats.objects.filter(graph=graph).values_list("node_id", "surfaced_count")) == surfaced

    # Explain and the injection page say so.
    explained = client.get(f"/api/injections/{injection.pk}/explain/").json()
    assert explained["abstained"] is True and explained["confidence"] == body["confidence"]
    assert {c["cut"] for c in explained["candidates"]} == {"abstained"}

    kept = ask(client, graph, ON_TOPIC, "s-on").json()
    assert kept["abstained"] is False and kept["items"]


def test_the_injection_page_says_it_abstained(client, rg, api, ada, alice, oscar, confidences):
    on, off = confidences
    set_floor(rg["graph"], round((on + off) / 2, 4), alice)
    injection = ask(api(ada), rg["graph"], OFF_TOPIC, "page").json()["injection"]
    client.force_login(oscar)
    page = client.get(f"/g/{rg['graph'].pk}/injections/{injection}/").content.decode()
    assert 'id="abstained"' in page and "nothing was given" in page


def test_start_nodes_or_anchors_never_abstain(rg, api, ada, alice, confidences):
    on, off = confidences
    set_floor(rg["graph"], round((on + off) / 2, 4), alice)
    a = rg["nodes"]["a"].pk
    for extra in ({"start_nodes": [a]}, {"anchors": [a]}):
        body = ask(api(ada), rg["graph"], OFF_TOPIC, f"s-{sorted(extra)[0]}", **extra).json()
        assert body["abstained"] is False and body["items"], extra


def test_the_mcp_tool_says_in_words_that_it_abstained(rg, ada, alice, confidences):
    on, off = confidences
    set_floor(rg["graph"], round((on + off) / 2, 4), alice)
    answer = ranking_mcp.context(ada, rg["graph"].pk, {"session": "m1", "query": OFF_TOPIC})
    assert answer["abstained"] is True and answer["items"] == []
    assert answer["note"].startswith("Abstained: nothing in this graph is relevant")
    kept = ranking_mcp.context(ada, rg["graph"].pk, {"session": "m2", "query": ON_TOPIC})
    assert kept["abstained"] is False and "note" not in kept


@pytest.mark.parametrize("value", [1.5, -0.1, "high", None])
def test_a_bad_floor_is_a_400_naming_it_and_writes_nothing(api, acme_graph, oscar, value):
    url = f"/api/graphs/{acme_graph.pk}/policy/"
    response = api(oscar).patch(url, {"abstain_floor": value}, format="json")
    assert response.status_code == 400 and "abstain_floor" in response.json(), response.content
    assert PolicyRevision.objects.filter(graph=acme_graph).count() == 1


def test_the_floor_is_a_versioned_policy_number(api, acme_graph, oscar):
    url = f"/api/graphs/{acme_graph.pk}/policy/"
    assert api(oscar).get(url).json()["abstain_floor"] == 0.0
    response = api(oscar).patch(url, {"abstain_floor": 0.3, "note": "calibrated by hand"}, format="json")
    assert response.status_code == 201 and response.json()["abstain_floor"] == 0.3
    assert [r.abstain_floor for r in PolicyRevision.objects.filter(graph=acme_graph).order_by("revision")] == [0, 0.3]


def test_the_schema_documents_the_new_keys(api, alice):
    schemas = api(alice).get("/api/schema/", {"format": "json"}).json()["components"]["schemas"]
    answer = schemas["ContextResponse"]
    assert {"confidence", "abstained"} <= set(answer["properties"]) and {"confidence", "abstained"} <= set(
        answer["required"]
    )
    assert "vector_score" in schemas["SelectedItem"]["properties"]
    assert "abstain_floor" in schemas["Policy"]["properties"]


def test_whatif_replays_the_floor_on_each_logged_confidence(rg, api, ada, oscar, client, confidences):
    # The floor decides whether an answer is given, not its order: the what-if replays it on each logged answer's
    # confidence (as the context call decides it) and says how many would abstain now and under the draft.
    on, off = confidences
    floor = round((on + off) / 2, 4)
    ask(api(ada), rg["graph"], OFF_TOPIC, "probe-directed", start_nodes=[rg["nodes"]["a"].pk])  # never abstains
    r = api(oscar).post(f"/api/graphs/{rg['graph'].pk}/whatif/", {"policy": {"abstain_floor": floor}}, format="json")
    assert r.status_code == 200, r.content
    body = r.json()
    assert body["gated"] == ["abstain_floor"] and "abstain_floor" in body["replayed"]
    assert "abstain_floor" not in {row["field"] for row in body["not_modelled"]}
    gate = {
        row["session"]: (row["confidence"], row["abstained_current"], row["abstained_draft"])
        for row in body["injections"]
    }
    assert gate["probe-on"] == (on, False, False) and gate["probe-off"] == (off, False, True)
    assert gate["probe-directed"][1:] == (False, False)
    assert body["abstained"] == {"current": 0, "draft": 1, "current_used": 0, "draft_used": 0, "without_confidence": 0}
    # The tune page says it in words.
    client.force_login(oscar)
    current = rg["graph"].current_policy()
    data = {name: getattr(current, name) for name in POLICY_NUMBERS}
    data.update(ceiling_mode=current.ceiling_mode, abstain_floor=floor, whatif_n=20)
    for et in EdgeType.objects.filter(graph=rg["graph"]):
        data[f"priority_{et.pk}"] = et.priority
    page = client.post(f"/g/{rg['graph'].pk}/tune/preview/", data).content.decode()
    assert (
        "would say “nothing relevant”" in page
        and "now <strong>0</strong> of 3, under the draft <strong>1</strong>" in page
    )
    bad = api(oscar).post(f"/api/graphs/{rg['graph'].pk}/whatif/", {"policy": {"abstain_floor": 2}}, format="json")
    assert bad.status_code == 400 and "abstain_floor" in str(bad.json())


def test_tenancy_and_roles_are_unchanged(rg, api, rita, mallory, ada, alice, confidences):
    on, off = confidences
    set_floor(rg["graph"], round((on + off) / 2, 4), alice)
    graph = rg["graph"]
    assert ask(api(mallory), graph, OFF_TOPIC, "x1").status_code == 404  # another organization's graph
    assert ask(api(rita), graph, OFF_TOPIC, "x2").status_code == 403  # reviewers read, never log
    assert api(rita).patch(f"/api/graphs/{graph.pk}/policy/", {"abstain_floor": 0.0}, format="json").status_code == 403
    assert ask(api(ada), graph, OFF_TOPIC, "x3").json()["abstained"] is True
