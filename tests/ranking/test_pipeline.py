"""The retrieval pipeline behind context and search: each way into the candidates, exclusion, the
learned components, credit to the path, and learning on the question-only path agents take.

The graph is built with hand-made embeddings so every similarity is known exactly (no embedder).
"""

import math
from datetime import UTC, datetime

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import AgentSession, InjectionCandidate, UseEvent
from graphadmin.models import Edge, EdgeType, Node
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.explain import explain
from ranking.retrieval import prepare, search

pytestmark = pytest.mark.django_db

DIM = 384


def unit(*parts):
    """A unit vector from (dimension, value) pairs."""
    v = [0.0] * DIM
    for i, x in parts:
        v[i] = x
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


Q = unit((0, 1.0))  # the query


@pytest.fixture
def pg(acme_graph):
    """a (sim 1.0), b (sim 0.6): vector hits; a -> c -> e: reached by expansion only (sim 0);
    x -> d: a triplet hit (its triplet embedding is the query); s: a node to start from."""
    sims = {"a": 1.0, "b": 0.6, "c": 0.0, "e": 0.0, "d": 0.0, "x": 0.0, "s": 0.0}
    nodes = {}
    for i, (key, sim) in enumerate(sims.items()):
        vec = unit((0, sim), (10 + i, math.sqrt(1 - sim * sim))) if sim < 1 else Q
        nodes[key] = Node.objects.create(
            graph=acme_graph, key=key, title=key.upper(), text=f"note {key}", embedding=vec
        )
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    edges = {}
    for s, t in [("a", "c"), ("c", "e"), ("x", "d"), ("s", "c")]:
        edges[f"{s}>{t}"] = Edge.objects.create(
            graph=acme_graph,
            source=nodes[s],
            target=nodes[t],
            edge_type=related,
            triplet_embedding=Q if (s, t) == ("x", "d") else None,
        )
    return {"graph": acme_graph, "nodes": nodes, "edges": edges}


def ctx(pg, session="s1", **kw):
    kw.setdefault("vector", Q)
    kw.setdefault("k", 2)
    kw.setdefault("budget", 20)
    return assemble_context(prepare(pg["graph"], RetrievalRequest(session=session, **kw)))


def by_key(result):
    return {item["key"]: item for item in result.selected}


def test_each_way_in(pg):
    n, e = pg["nodes"], pg["edges"]
    # t: a start node no link joins to anything; s, the other, is joined to c (a -> c <- s).
    t = Node.objects.create(graph=pg["graph"], key="t", title="T", text="note t", embedding=unit((30, 1.0)))
    items = by_key(ctx(pg, start_nodes=[n["s"].pk, t.pk]))
    assert (items["a"]["entry"], items["a"]["path"], items["a"]["hops"]) == ("vector", [], 0)
    assert items["b"]["entry"] == "vector"
    assert (items["d"]["entry"], items["d"]["path"]) == ("triplet", [e["x>d"].pk])
    assert (items["x"]["entry"], items["x"]["path"]) == ("triplet", [e["x>d"].pk])
    assert (items["t"]["entry"], items["t"]["hops"]) == ("start", 0)
    # A start node keeps its way in (the caller named it), though a -> c <- s would carry more than its own match.
    assert (items["s"]["entry"], items["s"]["hops"], items["s"]["path"]) == ("start", 0, [])
    assert (
        items["c"]["entry"] == "expansion"
        and items["c"]["hops"] == 1
        and items["c"]["path"] in ([e["a>c"].pk], [e["s>c"].pk])
    )
    assert (items["e"]["entry"], items["e"]["hops"]) == ("expansion", 2)
    assert items["e"]["path"][-1] == e["c>e"].pk and len(items["e"]["path"]) == 2
    assert items["a"]["rank"] == 1  # the best vector hit is a candidate and comes first


def test_start_nodes_are_candidates_and_best_hits_are_kept(pg):
    n = pg["nodes"]
    result = ctx(pg, start_nodes=[n["s"].pk], budget=3)
    keys = [i["key"] for i in result.selected]
    assert keys[0] == "a" and len(keys) == 3
    log = InjectionCandidate.objects.filter(injection=result.injection)
    assert log.filter(node=n["s"]).exists()


def test_exclude_drops_held_nodes_but_they_still_lead_on(pg):
    n = pg["nodes"]
    items = by_key(ctx(pg, exclude=[n["a"].pk]))
    assert "a" not in items and "c" in items and items["c"]["path"] == [pg["edges"]["a>c"].pk]
    assert not InjectionCandidate.objects.filter(node=n["a"]).exists()


def test_the_log_is_complete_and_frozen(pg):
    result = ctx(pg, budget=2)
    cands = list(InjectionCandidate.objects.filter(injection=result.injection).order_by("rank"))
    # a, b, c, e, x, d, and s: expansion walks the link s -> c from its target (a backlink of c).
    assert len(cands) == result.considered == 7
    assert [c.selected for c in cands] == [True, True, False, False, False, False, False]
    assert {c.features["cut"] for c in cands[2:]} == {"budget"}
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
        assert {"entry", "path", "feedback_weight", "path_weight", "novelty"} <= set(c.features)
    explained = explain(result.injection)
    e = next(c for c in explained["candidates"] if c["node"] == pg["nodes"]["e"].pk)
    assert e["entry"] == "expansion" and e["path_text"] == "A -related-> C -related-> E"
    s = next(c for c in explained["candidates"] if c["node"] == pg["nodes"]["s"].pk)
    assert s["entry"] == "expansion" and s["path_text"] == "A -related-> C <-related- S"  # s -> c walked backwards
    assert s["features"]["reverse"] is True and e["features"]["reverse"] is False


def test_feedback_weight_is_its_own_component_and_a_bias_around_neutral(acme_graph):
    twin = unit((0, 0.8), (1, 0.6))
    plain = Node.objects.create(graph=acme_graph, key="plain", title="P", text="p", embedding=twin)
    flagged = Node.objects.create(
        graph=acme_graph, key="flagged", title="F", text="f", embedding=twin, feedback_weight=0.3
    )
    shown = Node.objects.create(graph=acme_graph, key="shown", title="S", text="s", embedding=twin, feedback_weight=0.9)
    items = {c.node_id: c for c in search(prepare(acme_graph, RetrievalRequest(vector=Q, k=5))).items}
    fb = items[flagged.pk].scored.component("feedback")
    # At most FEEDBACK_BOUND below neutral: the node's own EMA is a global prior, bounded (scoring.FEEDBACK_BOUND).
    assert (fb.raw, fb.coefficient) == (pytest.approx(-0.05), 0.3) and fb.contribution == pytest.approx(-0.015)
    assert items[flagged.pk].rank == 3 and items[flagged.pk].scored.total == pytest.approx(
        items[plain.pk].scored.total - 0.015
    )
    # Untouched (0.5) moves nothing; above neutral the EMA (which rises with how often a note is shown) lifts nothing.
    assert items[plain.pk].scored.component("feedback").contribution == 0.0
    assert items[shown.pk].scored.component("feedback").contribution == 0.0
    assert items[shown.pk].scored.total == pytest.approx(items[plain.pk].scored.total)


def test_exploration_at_zero_changes_no_order(pg, oscar):
    graph = pg["graph"]
    for i in range(3):
        ctx(pg, session=f"warm-{i}", budget=2)
        actions.do_apply_outcome(graph, f"warm-{i}", "rejected", actor=oscar)  # a failure: exploration applies
    # One clock for both searches: recency moves with time, and a slow run must not look like a changed order.
    now = datetime.now(UTC)
    with_bonus = search(prepare(graph, RetrievalRequest(vector=Q, k=20), now=now)).items
    assert any(c.scored.component("exploration").contribution for c in with_bonus)
    revision = graph.current_policy()
    revision.pk, revision.revision, revision.exploration = None, revision.revision + 1, 0.0
    revision.save()
    at_zero = search(prepare(graph, RetrievalRequest(vector=Q, k=20), now=now)).items
    assert all(c.scored.component("exploration").contribution == 0.0 for c in at_zero)
    # At zero every total is the total without the bonus: the order is the one the other components give
    # (up to the recency term, which moves by the time between the two calls: ~1e-9 per second).
    totals = {c.node_id: c.scored.total for c in at_zero}
    for c in with_bonus:
        assert totals[c.node_id] == pytest.approx(
            c.scored.total - c.scored.component("exploration").contribution, abs=1e-6
        )


def test_exploration_bonus_goes_to_what_similar_questions_have_no_evidence_about_after_a_failure(pg, oscar):
    warm = [ctx(pg, session=f"warm-{i}", budget=2) for i in range(3)]
    raw = {
        c.node_id: c.scored.component("exploration").raw
        for c in search(prepare(pg["graph"], RetrievalRequest(vector=Q, k=20))).items
    }
    assert set(raw.values()) == {0.0}  # shown, never reported: no evidence of a failure, no exploration
    actions.do_apply_outcome(pg["graph"], "warm-2", "rejected", actor=oscar)
    raw = {
        c.node_id: c.scored.component("exploration").raw
        for c in search(prepare(pg["graph"], RetrievalRequest(vector=Q, k=20))).items
    }
    shown = {i["node"] for i in warm[2].selected}
    for node_id, novelty in raw.items():
        assert novelty == (0.0 if node_id in shown else 1.0)


def test_credit_along_a_two_hop_path(pg, oscar):
    n, e = pg["nodes"], pg["edges"]
    Edge.objects.filter(pk=e["a>c"].pk).update(weight=0.6)
    result = ctx(pg, k=1)
    assert by_key(result)["e"]["path"] == [e["a>c"].pk, e["c>e"].pk]
    session = result.injection.session
    done = actions.do_record_uses(session, [UseItem("node", n["e"].pk, "explicit")], actor=oscar)
    assert (done.node_updates, done.edge_updates) == (1, 2)
    assert Node.objects.get(pk=n["e"].pk).feedback_weight == pytest.approx(0.55)  # 0.5 + 0.1 * 0.5
    assert Edge.objects.get(pk=e["a>c"].pk).weight == pytest.approx(0.64)  # 0.6 + 0.1 * 0.4
    assert Edge.objects.get(pk=e["c>e"].pk).weight == pytest.approx(0.55)
    assert set(UseEvent.objects.filter(session=session, source="path").values_list("edge_id", flat=True)) == {
        e["a>c"].pk,
        e["c>e"].pk,
    }
    # Once per session: the same use again, or a use of c (whose path a->c was credited), moves no edge twice.
    again = actions.do_record_uses(
        session, [UseItem("node", n["e"].pk, "explicit"), UseItem("node", n["c"].pk, "explicit")], actor=oscar
    )
    assert (again.node_updates, again.edge_updates) == (1, 0)
    assert Edge.objects.get(pk=e["a>c"].pk).weight == pytest.approx(0.64)


def test_a_negative_flag_moves_the_node_and_the_last_edge_down(pg, oscar):
    n, e = pg["nodes"], pg["edges"]
    session = ctx(pg, k=1).injection.session
    actions.do_record_uses(session, [UseItem("node", n["e"].pk, "negative")], actor=oscar)
    assert Node.objects.get(pk=n["e"].pk).feedback_weight == pytest.approx(0.45)
    assert Edge.objects.get(pk=e["c>e"].pk).weight == pytest.approx(0.45)
    assert Edge.objects.get(pk=e["a>c"].pk).weight == 0.5


@pytest.fixture
def twins(acme, alice):
    """Two graphs with the same three notes (similarities 0.90, 0.88, 0.86 to the query): one learns, one is frozen."""
    from graphadmin import actions as core_actions

    out = {}
    for slug in ("learning", "frozen"):
        graph = core_actions.do_create_graph(acme, slug, slug, actor=alice)
        for key, sim in (("first", 0.90), ("second", 0.88), ("third", 0.86)):
            Node.objects.create(
                graph=graph,
                key=key,
                title=key,
                text=key,
                embedding=unit((0, sim), (1 + len(key), math.sqrt(1 - sim * sim))),
            )
        out[slug] = graph
    return out


def rank_of(graph, key):
    return next(c.rank for c in search(prepare(graph, RetrievalRequest(vector=Q, k=10))).items if c.row.key == key)


def test_question_only_learning_ranks_the_used_note_above_its_frozen_twin(twins, oscar):
    learning, frozen = twins["learning"], twins["frozen"]
    assert rank_of(learning, "third") == rank_of(frozen, "third") == 3
    for i in range(3):
        assemble_context(prepare(frozen, RetrievalRequest(session=f"round-{i}", vector=Q, budget=3)))
        result = assemble_context(prepare(learning, RetrievalRequest(session=f"round-{i}", vector=Q, budget=3)))
        third = next(item for item in result.selected if item["key"] == "third")
        session = AgentSession.objects.get(graph=learning, external_id=f"round-{i}")
        actions.do_record_uses(session, [UseItem("node", third["node"], "explicit")], actor=oscar)
        actions.do_apply_outcome(learning, f"round-{i}", "accepted", actor=oscar)
    assert rank_of(learning, "third") < rank_of(frozen, "third") == 3


def test_memory_lifts_what_agents_used_for_the_same_question_only(twins, oscar):
    learning = twins["learning"]
    result = assemble_context(prepare(learning, RetrievalRequest(session="m1", vector=Q, budget=3)))
    third = next(item for item in result.selected if item["key"] == "third")
    actions.do_record_uses(result.injection.session, [UseItem("node", third["node"], "explicit")], actor=oscar)
    same = {
        c.row.key: c.scored.component("memory")
        for c in search(prepare(learning, RetrievalRequest(vector=Q, k=10))).items
    }
    assert same["third"].raw == pytest.approx(1.0) and same["third"].coefficient == 0.2  # full strength at once
    assert same["first"].raw == 0.0  # given, not used: no change
    other = unit((0, 0.3), (1, 0.954))  # another question (similarity 0.3 to the first)
    far = {
        c.row.key: c.scored.component("memory").raw
        for c in search(prepare(learning, RetrievalRequest(vector=other, k=10))).items
    }
    assert far["third"] < 0.001


def test_context_gives_one_slot_to_a_candidate_similar_questions_never_showed(pg, oscar):
    n = pg["nodes"]
    first = ctx(pg, session="e1", budget=2)
    assert [i["key"] for i in first.selected] == ["a", "b"]  # no history yet: the two best hits
    assert [i["key"] for i in ctx(pg, session="e1b", budget=2).selected] == ["a", "b"]  # no failure: the same
    actions.do_apply_outcome(pg["graph"], "e1", "rework", actor=oscar)  # rework, no use reported: teaches nothing
    assert [i["key"] for i in ctx(pg, session="e1c", budget=2).selected] == ["a", "b"]
    actions.do_record_uses(
        AgentSession.objects.get(graph=pg["graph"], external_id="e1b"),
        [UseItem("node", n["a"].pk, "explicit")],
        actor=oscar,
    )
    actions.do_apply_outcome(pg["graph"], "e1b", "rejected", actor=oscar)  # a used, b shown and not: a failure
    second = ctx(pg, session="e2", budget=2)
    keys = [i["key"] for i in second.selected]
    assert keys[0] == "a" and keys[1] not in ("a", "b")  # the best hit stays; the last place goes to an unseen note
    log = {c.node_id: c.features["cut"] for c in InjectionCandidate.objects.filter(injection=second.injection)}
    # b leaves the context: displaced by the exploration slot, or (since a hit's neighbours compete through
    # their links) cut by an unseen note that now ranks second on its own and takes the place outright.
    assert log[n["b"].pk] in ("displaced", "budget") and log[second.selected[1]["node"]] in ("explore", "")
    # At exploration 0 there is no such slot.
    revision = pg["graph"].current_policy()
    revision.pk, revision.revision, revision.exploration = None, revision.revision + 1, 0.0
    revision.save()
    assert [i["key"] for i in ctx(pg, session="e3", budget=2).selected] == ["a", "b"]
