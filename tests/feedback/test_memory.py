"""Agent-written memory through the REST API: remember, link, forget; who may; duplicates; bounds.

The cast (tests/conftest.py): ada and abe are acme's agents, oscar its operator, rita a reviewer;
mallory is globex's admin. ``small_graph`` gives acme_graph the imported notes a -> b -> c.
"""

from __future__ import annotations

import pytest
from django.test import override_settings

from feedback import memory
from feedback.models import AgentSession, RecordChange, UpdateBatch
from graphadmin.models import AuditEvent, Edge, Node

pytestmark = pytest.mark.django_db


def url(graph, call: str) -> str:
    return f"/api/graphs/{graph.pk}/memory/{call}/"


def remember(api, user, graph, **body):
    return api(user).post(url(graph, "remember"), body, format="json")


def test_an_agent_remembers_a_note_with_its_provenance(api, ada, acme_graph, small_graph):
    response = remember(
        api,
        ada,
        acme_graph,
        text="The cache TTL of the ranking service is 5 minutes; see [[a]].",
        kind="decision",
        tags=["cache"],
        links=[{"node": small_graph["b"].pk, "type": "depends_on"}, {"node": "c"}],
        session="s-1",
    )
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["status"] == "created" and body["unresolved"] == []
    node = Node.objects.get(pk=body["node"])
    assert node.created_by == ada and node.kind == "decision" and node.tags == ["cache"]
    assert node.source.startswith("agent:ada session:s-1 at:")
    assert node.embedding is not None and node.embedding_model
    assert node.title.startswith("The cache TTL")
    edges = set(Edge.objects.filter(source=node).values_list("target__key", "edge_type__name"))
    assert edges == {("b", "depends_on"), ("c", "related"), ("a", "related")}  # the wikilink too
    assert all(e.created_by == ada and e.triplet_embedding is not None for e in Edge.objects.filter(source=node))
    batch = UpdateBatch.objects.get(pk=body["batch"])
    assert batch.kind == "memory" and batch.trigger_user == ada
    assert batch.trigger_session == AgentSession.objects.get(graph=acme_graph, external_id="s-1")
    assert batch.node_updates == 1 and batch.edge_updates == 3
    assert RecordChange.objects.filter(batch=batch).count() == 4
    event = AuditEvent.objects.get(action="graph.memory")
    assert event.payload["batch"] == batch.pk and event.payload["session"] == "s-1"


def test_the_same_key_makes_a_new_version_and_keeps_the_old_text(api, ada, acme_graph):
    first = remember(
        api, ada, acme_graph, text="Deploys run on Tuesdays.", key="ops/deploy-day", kind="decision"
    ).json()
    again = remember(api, ada, acme_graph, text="Deploys run on Tuesdays.", key="ops/deploy-day")
    assert again.status_code == 200 and again.json()["status"] == "unchanged" and again.json()["batch"] is None
    second = remember(api, ada, acme_graph, text="Deploys run on Thursdays since March.", key="ops/deploy-day").json()
    assert second["status"] == "updated" and second["node"] == first["node"]
    node = Node.objects.get(pk=first["node"])
    assert node.text == "Deploys run on Thursdays since March."
    assert node.kind == "decision"  # not given on the update: kept
    versions = memory.node_versions(node)
    assert [v["text"] for v in versions] == ["Deploys run on Thursdays since March.", "Deploys run on Tuesdays."]
    assert versions[0]["previous_text"] == "Deploys run on Tuesdays." and versions[0]["by"] == "ada"
    assert Node.objects.filter(graph=acme_graph, key="ops/deploy-day").count() == 1


def test_a_near_duplicate_links_to_the_existing_note_instead_of_a_copy(api, ada, acme_graph, small_graph):
    text = "The nightly import job fails when the vault holds a file larger than two megabytes."
    first = remember(api, ada, acme_graph, text=text).json()
    dup = remember(api, ada, acme_graph, text=text.replace("megabytes.", "megabytes"), links=[{"node": "a"}])
    body = dup.json()
    assert dup.status_code == 200 and body["status"] == "duplicate", body
    assert body["duplicate_of"] == first["node"] == body["node"] and body["similarity"] >= 0.95
    assert Node.objects.filter(graph=acme_graph, created_by=ada).count() == 1
    assert Edge.objects.filter(source_id=first["node"], target=small_graph["a"]).exists()
    # Another kind, or a different text, is a note of its own.
    other = remember(api, ada, acme_graph, text=text, kind="decision").json()
    assert other["status"] == "created"
    different = remember(api, ada, acme_graph, text="Reviewers read batches but never roll them back.").json()
    assert different["status"] == "created"


def test_the_threshold_is_the_policys(api, ada, oscar, acme_graph):
    from graphadmin import actions

    actions.do_set_policy(acme_graph, {"memory_duplicate_threshold": 1.0}, actor=oscar)
    text = "Weights decay weekly when edges are not traversed."
    remember(api, ada, acme_graph, text=text)
    assert remember(api, ada, acme_graph, text=text + " Noted.").json()["status"] == "created"


def test_agents_write_only_their_own_notes(api, ada, abe, rita, oscar, acme_graph, small_graph):
    mine = remember(api, ada, acme_graph, text="Ada's observation about the queue.", key="ada/queue").json()
    # abe may not version, link from or forget ada's note, nor imported ones
    response = remember(api, abe, acme_graph, text="Overwritten by abe.", key="ada/queue")
    assert response.status_code == 403
    response = api(abe).post(url(acme_graph, "link"), {"source": mine["node"], "target": "a"}, format="json")
    assert response.status_code == 403
    response = api(abe).post(url(acme_graph, "forget"), {"nodes": [mine["node"]]}, format="json")
    assert response.status_code == 403
    response = api(ada).post(url(acme_graph, "forget"), {"nodes": [small_graph["a"].pk]}, format="json")
    assert response.status_code == 403
    response = remember(api, ada, acme_graph, text="Rewrite of an imported note.", key="a")
    assert response.status_code == 403
    # a reviewer writes nothing
    assert remember(api, rita, acme_graph, text="A reviewer's note.").status_code == 403
    assert Node.objects.get(pk=mine["node"]).text == "Ada's observation about the queue."
    # ada links from and forgets her own; the operator anything
    response = api(ada).post(url(acme_graph, "link"), {"source": "ada/queue", "target": "a"}, format="json")
    assert response.status_code == 201 and response.json()["status"] == "created"
    again = api(ada).post(url(acme_graph, "link"), {"source": "ada/queue", "target": "a"}, format="json")
    assert again.json()["status"] == "exists" and again.json()["batch"] is None
    response = api(ada).post(url(acme_graph, "forget"), {"nodes": [mine["node"]]}, format="json")
    assert response.status_code == 200 and response.json()["nodes"] == [mine["node"]]
    assert Node.objects.get(pk=mine["node"]).archived
    response = api(oscar).post(url(acme_graph, "forget"), {"nodes": [small_graph["a"].pk]}, format="json")
    assert response.status_code == 200 and Node.objects.get(pk=small_graph["a"].pk).archived


def test_another_organization_gets_404(api, mallory, acme_graph, small_graph):
    assert remember(api, mallory, acme_graph, text="Hello.").status_code == 404
    body = {"source": small_graph["a"].pk, "target": small_graph["b"].pk}
    assert api(mallory).post(url(acme_graph, "link"), body, format="json").status_code == 404
    forget = {"nodes": [small_graph["a"].pk]}
    assert api(mallory).post(url(acme_graph, "forget"), forget, format="json").status_code == 404
    assert not Node.objects.filter(graph=acme_graph, archived=True).exists()


def test_links_stay_in_the_graph_and_new_types_need_an_operator(api, ada, oscar, acme_graph, globex_graph):
    foreign = Node.objects.create(graph=globex_graph, key="secret", title="Secret", text="x")
    response = remember(api, ada, acme_graph, text="Crosses graphs.", links=[{"node": foreign.pk}])
    assert response.status_code == 400 and "links[0].node" in response.json()
    response = remember(api, ada, acme_graph, text="Crosses graphs.", links=[{"node": "secret"}])
    assert response.status_code == 400 and "links[0].node" in response.json()
    response = remember(api, ada, acme_graph, text="New type.", key="n1", links=[{"node": "n1", "type": "blocks"}])
    assert response.status_code == 400
    mine = remember(api, ada, acme_graph, text="Mine.", key="mine").json()
    response = api(ada).post(url(acme_graph, "link"), {"source": "mine", "target": "mine"}, format="json")
    assert response.status_code == 400 and "target" in response.json()
    theirs = remember(api, oscar, acme_graph, text="Operator's note.", key="op").json()
    response = api(ada).post(
        url(acme_graph, "link"), {"source": "mine", "target": "op", "type": "blocks"}, format="json"
    )
    assert response.status_code == 400 and "new edge type needs an operator" in response.json()["type"][0]
    response = api(oscar).post(
        url(acme_graph, "link"), {"source": "op", "target": "mine", "type": "blocks"}, format="json"
    )
    assert response.status_code == 201
    assert Edge.objects.get(source_id=theirs["node"], target_id=mine["node"]).edge_type.name == "blocks"
    assert not Node.objects.filter(graph=acme_graph, text="Crosses graphs.").exists()


def test_unresolved_wikilinks_are_reported(api, ada, acme_graph, small_graph):
    body = remember(api, ada, acme_graph, text="See [[a]] and [[nowhere]].").json()
    assert body["status"] == "created"
    assert body["unresolved"] == [{"link": "nowhere", "reason": "no such note"}]
    assert Edge.objects.filter(source_id=body["node"]).count() == 1


# --------------------------------------------------------------------------------------------------
# Bounds: each refused with the limit named, nothing written.


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x" * (memory.MAX_TEXT_CHARS + 1)}, "text"),
        ({"text": ""}, "text"),
        ({"text": "ok", "links": [{"node": "a"}] * (memory.MAX_LINKS + 1)}, "links"),
        ({"text": "ok", "key": "../etc/passwd"}, "key"),
        ({"text": "ok", "key": "notes/a|b"}, "key"),
        ({"text": "ok", "key": "notes/x.md"}, "key"),
        ({"text": "ok", "kind": "Not A Kind"}, "kind"),
        ({"text": "ok", "tags": ["t"] * (memory.MAX_TAGS + 1)}, "tags"),
        ({"text": "ok", "links": [{"node": True}]}, "links"),
    ],
)
def test_bounds_are_400s_naming_the_field(api, ada, acme_graph, small_graph, body, field):
    response = api(ada).post(url(acme_graph, "remember"), body, format="json")
    assert response.status_code == 400, response.json()
    assert field in response.json()
    assert not Node.objects.filter(graph=acme_graph, created_by=ada).exists()
    assert not UpdateBatch.objects.filter(kind="memory").exists()


def test_forget_bounds(api, ada, acme_graph):
    response = api(ada).post(url(acme_graph, "forget"), {"nodes": list(range(1, 52))}, format="json")
    assert response.status_code == 400 and "nodes" in response.json()
    response = api(ada).post(url(acme_graph, "forget"), {}, format="json")
    assert response.status_code == 400 and "nodes" in response.json()
    response = api(ada).post(url(acme_graph, "forget"), {"nodes": [999999]}, format="json")
    assert response.status_code == 400 and "nodes[0]" in response.json()


@override_settings(MEMORY_CALLS_PER_MINUTE=3)
def test_calls_per_minute_are_limited_with_a_429_naming_the_limit(api, ada, abe, acme_graph):
    for i in range(3):
        assert (
            remember(api, ada, acme_graph, text=f"Note number {i} about a different topic {i * 7}.").status_code == 201
        )
    response = remember(api, ada, acme_graph, text="One too many.")
    assert response.status_code == 429
    assert "MEMORY_CALLS_PER_MINUTE" in response.json()["detail"] and int(response["Retry-After"]) >= 1
    assert not Node.objects.filter(text="One too many.").exists()
    assert remember(api, abe, acme_graph, text="Abe has his own budget.").status_code == 201
