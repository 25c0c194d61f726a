"""Expansion walks links both ways and carries relevance (docs/ranking.md "Expansion"), at the retrieval
level on a real database: a backlink's neighbour of the best hit earns a place within the budget, rolling
back what raised a learned link's weight gives the ranking back exactly, ``carry: 0`` gives the ``hops: 0``
ranking, and a question node is never a candidate.

Hand-made embeddings, so every similarity is known exactly (no embedder):

    h (similarity 1.0, the best hit)      v1..v4 (0.3, 0.25, 0.2, 0.15: the other vector hits)
    n -> h (related; n has no match of its own: only the backlink of h reaches it)
"""

import math
from datetime import UTC, datetime

import pytest

from feedback import actions
from feedback.models import InjectionCandidate, UpdateBatch
from feedback.rules import ANSWERED, CO_USED, QUESTION_KIND
from graphadmin.actions import do_set_policy
from graphadmin.models import Edge, EdgeType, Node
from graphadmin_client import RetrievalRequest
from ranking import retrieval
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


def note(graph, key, sim, dim, **kw):
    """A note at similarity ``sim`` to Q (its other part on its own dimension ``dim``)."""
    vec = Q if sim >= 1 else unit((0, sim), (dim, math.sqrt(1 - sim * sim)))
    return Node.objects.create(graph=graph, key=key, title=key.upper(), text=f"note {key}", embedding=vec, **kw)


@pytest.fixture
def bg(acme_graph):
    graph = acme_graph
    nodes = {"h": note(graph, "h", 1.0, 1)}
    for i, sim in enumerate((0.3, 0.25, 0.2, 0.15), start=1):
        nodes[f"v{i}"] = note(graph, f"v{i}", sim, 10 + i)
    nodes["n"] = note(graph, "n", 0.0, 20)
    related = EdgeType.objects.get(graph=graph, name="related")
    link = Edge.objects.create(graph=graph, source=nodes["n"], target=nodes["h"], edge_type=related)
    return {"graph": graph, "nodes": nodes, "link": link, "related": related}


def retrieve(graph, now, **kw):
    """Every candidate of a retrieval whose vector side gives the 5 notes the query matches (h, v1..v4): what
    else is a candidate, expansion reached."""
    return retrieval.retrieve(prepare(graph, RetrievalRequest(vector=Q, k=5, **kw), now=now)).items


def ranking(graph, now, **kw):
    """(node id, total as hex) of every candidate in rank order: equal only when every number is."""
    return [(c.node_id, c.scored.total.hex()) for c in retrieve(graph, now, **kw)]


def test_a_backlink_neighbour_of_the_best_hit_is_selected_within_the_budget_with_the_link_as_its_path(bg):
    n, link = bg["nodes"], bg["link"]
    result = assemble_context(prepare(bg["graph"], RetrievalRequest(session="b1", vector=Q, k=5, budget=2)))
    # h (0.8), then n: the link n -> h, walked from h, carries 0.9 * 0.8 of h's relevance (times the link's
    # specificity), above v1's own 0.38; v1 is cut by the budget.
    assert [i["node"] for i in result.selected] == [n["h"].pk, n["n"].pk]
    item = result.selected[1]
    assert (item["entry"], item["hops"], item["path"], item["edge"]) == ("expansion", 1, [link.pk], link.pk)
    log = {c.node_id: c for c in InjectionCandidate.objects.filter(injection=result.injection)}
    assert log[n["v1"].pk].features["cut"] == "budget"
    neighbour = log[n["n"].pk]
    assert neighbour.features["reverse"] is True  # walked from the stored target to the stored source
    assert neighbour.components["vector"]["contribution"] == 0.0
    assert neighbour.components["graph"]["contribution"] > 0.3  # the lift its path carried
    assert neighbour.total > log[n["v1"].pk].total
    explained = next(c for c in explain(result.injection)["candidates"] if c["node"] == n["n"].pk)
    assert explained["path_text"] == "H <-related- N"


def test_the_injection_page_draws_a_backlink_the_way_it_was_walked(bg, client, rita):
    n, link = bg["nodes"], bg["link"]
    result = assemble_context(prepare(bg["graph"], RetrievalRequest(session="b2", vector=Q, k=5, budget=2)))
    client.force_login(rita)
    r = client.get(f"/g/{bg['graph'].pk}/injections/{result.injection.pk}/")
    assert r.status_code == 200
    c = next(c for c in r.context["explained"]["candidates"] if c["node"] == n["n"].pk)
    # From h (where the walk started) to n, over n -> h walked from its target.
    assert c["steps"] == [
        {"node": n["h"].pk, "title": "H"},
        {"edge": link.pk, "type": "related", "backward": True},
        {"node": n["n"].pk, "title": "N"},
    ]
    assert c["entry_text"].endswith(": from H, 1 hop")
    assert "&lt;-related-</a>" in r.content.decode()


def test_rolling_back_the_batch_that_raised_a_learned_links_weight_gives_the_ranking_back_exactly(bg, oscar):
    graph, n = bg["graph"], bg["nodes"]
    co_used, _ = EdgeType.objects.get_or_create(graph=graph, name="co_used")
    m = note(graph, "m", 0.0, 30)
    learned = Edge.objects.create(graph=graph, source=n["h"], target=m, edge_type=co_used)
    # A policy that lets a link's learned weight move its carry for every question (decision 0014; 0 by default).
    do_set_policy(graph, {"learned_carry": 1.0}, actor=oscar)
    now = datetime.now(UTC)  # one clock: recency moves with time
    before = ranking(graph, now)
    raised = actions.do_set_weights(graph, [actions.ManualValue("edge", learned.pk, "weight", 0.9)], actor=oscar)
    after = ranking(graph, now)
    assert after != before
    # The learned link carries more (0.9 + 0.5 * 0.4, capped at 0.99): m rises above n, which tied with it.
    order = [node for node, _total in after]
    assert order.index(m.pk) < order.index(n["n"].pk)
    assert float.fromhex(dict(after)[m.pk]) > float.fromhex(dict(before)[m.pk])
    actions.do_rollback_batch(UpdateBatch.objects.get(pk=raised.batch_id), actor=oscar)
    assert ranking(graph, now) == before


def test_links_the_learning_wrote_do_not_fade_the_links_the_author_wrote(bg):
    """A note's degree, which fades its links' carry (scoring.link_specificity), counts authored links only:
    co_used links (feedback.rules.LEARNED_LINK_TYPES) join notes agents used together, which makes neither a
    hub. Counted, they took the context a used note's own links carried (LoCoMo 50, docs/learning.md)."""
    graph, n = bg["graph"], bg["nodes"]
    now = datetime.now(UTC)

    def carried_to_n():
        return next(c for c in retrieve(graph, now) if c.node_id == n["n"].pk).scored.component("graph").contribution

    before = carried_to_n()
    co_used, _ = EdgeType.objects.get_or_create(graph=graph, name=CO_USED)
    others = [note(graph, f"x{i}", 0.0, 30 + i) for i in range(4)]
    links = []
    for x in others:  # h and n each used with four other notes
        links.append(Edge.objects.create(graph=graph, source=n["h"], target=x, edge_type=co_used))
        links.append(Edge.objects.create(graph=graph, source=x, target=n["n"], edge_type=co_used))
    assert carried_to_n() == before
    # The same links written by an author make h and n hubs of five links: the link between them carries less.
    Edge.objects.filter(pk__in=[e.pk for e in links]).update(edge_type=bg["related"])
    assert carried_to_n() < before * 0.5


def test_carry_zero_gives_the_hops_zero_ranking_expansion_competing_on_its_own_match(bg):
    graph, n = bg["graph"], bg["nodes"]
    # A learned, tuned link: at carry 0 it carries nothing either.
    tuned = EdgeType.objects.create(graph=graph, name="tuned", priority=0.5)
    m = note(graph, "m", 0.0, 30)
    Edge.objects.create(graph=graph, source=n["h"], target=m, edge_type=tuned, weight=0.9)
    revision = graph.current_policy()
    revision.pk, revision.revision, revision.carry = None, revision.revision + 1, 0.0
    revision.save()
    now = datetime.now(UTC)
    hops0 = ranking(graph, now, hops=0)
    items = retrieve(graph, now)
    assert all(c.scored.component("graph").contribution == 0.0 for c in items)
    # The entry points keep the hops-0 order and totals exactly; what expansion reached follows, on its own
    # match (vector 0, hop 0.6 and its link's priority): below every entry point.
    assert [(c.node_id, c.scored.total.hex()) for c in items[: len(hops0)]] == hops0
    assert {c.node_id for c in items[len(hops0) :]} == {n["n"].pk, m.pk}
    assert {c.entry for c in items[len(hops0) :]} == {"expansion"}


def test_a_question_node_is_never_a_candidate(bg):
    graph, n = bg["graph"], bg["nodes"]
    # A past question on the query itself, linked both ways to the notes (its answered edge to h, and a
    # link from n to it): expansion from h and n would reach it in either direction, the vector side would
    # find it first.
    question = Node.objects.create(
        graph=graph, key="q1", title="note h question", text="note h", kind=QUESTION_KIND, embedding=Q
    )
    answered, _ = EdgeType.objects.get_or_create(graph=graph, name=ANSWERED)
    Edge.objects.create(graph=graph, source=question, target=n["h"], edge_type=answered, weight=0.8)
    Edge.objects.create(graph=graph, source=n["n"], target=question, edge_type=bg["related"])
    result = assemble_context(prepare(graph, RetrievalRequest(session="q", query="note h", vector=Q, k=50, budget=50)))
    logged = set(InjectionCandidate.objects.filter(injection=result.injection).values_list("node_id", flat=True))
    assert n["h"].pk in logged and n["n"].pk in logged and question.pk not in logged
    searched = search(prepare(graph, RetrievalRequest(query="note h", vector=Q, k=50, start_nodes=[n["n"].pk]))).items
    assert question.pk not in {c.node_id for c in searched}
    assert all(c.row.kind != QUESTION_KIND for c in searched)
