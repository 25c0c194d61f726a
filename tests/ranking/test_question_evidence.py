"""Question-conditional evidence (issue 23, item 3): question nodes with learned ``answered`` edges,
written by the one write path, read by retrieval, undone by a rollback; exploration only after a failure.

Hand-made embeddings, so every similarity is known exactly (no embedder).
"""

import math
from datetime import UTC, datetime

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import AgentSession, InjectionCandidate, UpdateBatch, WeightChange
from feedback.rules import ANSWERED, QUESTION_KIND
from graphadmin.models import Edge, Graph, Node
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


Q = unit((0, 1.0))  # the question


def near(similarity, axis=300):
    """A question whose cosine to Q is exactly ``similarity``."""
    return unit((0, similarity), (axis, math.sqrt(1 - similarity * similarity)))


NOTES = {  # key -> (cosine to Q, text with its own distinctive words)
    "first": (0.90, "harbor crane schedule monday shift"),
    "second": (0.88, "warehouse forklift battery rotation"),
    "third": (0.86, "customs clearance paperwork deadline friday"),
    "fourth": (0.84, "ferry timetable winter season changes"),
    "fifth": (0.82, "pilot boarding ladder inspection report"),
}


def make_graph(acme, alice, slug):
    from graphadmin import actions as core_actions

    graph = core_actions.do_create_graph(acme, slug, slug, actor=alice)
    for i, (key, (sim, text)) in enumerate(NOTES.items()):
        Node.objects.create(
            graph=graph, key=key, title=key, text=text, embedding=unit((0, sim), (10 + i, math.sqrt(1 - sim * sim)))
        )
    return graph


@pytest.fixture
def twins(acme, alice):
    """Two graphs with the same five notes: one learns, one is frozen."""
    return {slug: make_graph(acme, alice, slug) for slug in ("learning", "frozen")}


@pytest.fixture
def graph(twins):
    return twins["learning"]


NOW = datetime(2026, 12, 2, tzinfo=UTC)


def ranking(graph, vector=Q):
    return [
        (c.row.key, round(c.scored.total, 9))
        for c in search(prepare(graph, RetrievalRequest(vector=vector, k=10), now=NOW)).items
    ]


def keys(graph, vector=Q):
    return [k for k, _t in ranking(graph, vector)]


def memory(graph, vector=Q):
    return {
        c.row.key: c.scored.candidate.memory
        for c in search(prepare(graph, RetrievalRequest(vector=vector, k=10), now=NOW)).items
    }


def node(graph, key):
    return Node.objects.get(graph=graph, key=key)


def session_of(graph, name, vector=Q, budget=2):
    """A context call (``budget`` items) and its session."""
    result = assemble_context(prepare(graph, RetrievalRequest(session=name, vector=vector, budget=budget), now=NOW))
    return result, AgentSession.objects.get(graph=graph, external_id=name)


def answered(graph):
    """(question id, note key) -> weight of every answered edge."""
    return {
        (e.source_id, e.target.key): e.weight
        for e in Edge.objects.filter(graph=graph, edge_type__name=ANSWERED).select_related("target")
    }


def test_a_frozen_graph_answers_identically_every_round(graph):
    results = [session_of(graph, f"r{n}")[0] for n in range(5)]
    rounds = [[i["key"] for i in r.selected] for r in results]
    assert all(r == rounds[0] for r in rounds) and rounds[0] == ["first", "second"]
    assert not Node.objects.filter(graph=graph, kind=QUESTION_KIND).exists()  # nothing taught, nothing written
    cuts = InjectionCandidate.objects.filter(injection__in=[r.injection for r in results]).values_list(
        "features__cut", flat=True
    )
    assert "explore" not in set(cuts) and "displaced" not in set(cuts)  # no failure: no exploration slot


def test_a_use_counts_at_full_strength_on_first_report_through_a_batch(graph, oscar):
    result, session = session_of(graph, "s1", budget=3)
    done = actions.do_record_uses(session, [UseItem("node", node(graph, "third").pk, "explicit")], actor=oscar)
    question = Node.objects.get(graph=graph, kind=QUESTION_KIND)
    assert answered(graph) == {(question.pk, "third"): 1.0}
    change = WeightChange.objects.get(batch_id=done.batch_id, edge__edge_type__name=ANSWERED)
    assert (change.before, change.after, change.event) == (0.5, 1.0, "used")
    assert memory(graph)["third"] == pytest.approx(1.0)
    assert keys(graph)[0] == "third"  # 0.2 * 1.0 lifts it over the two better vector hits
    # The question node is ledger state, never a candidate, even for its own query.
    assert question.pk not in {c.node_id for c in search(prepare(graph, RetrievalRequest(vector=Q, k=50))).items}


def test_positive_evidence_from_similar_questions_negative_only_from_near_repeats(graph, oscar):
    _result, session = session_of(graph, "s1", budget=3)  # shown: first, second, third
    actions.do_record_uses(session, [UseItem("node", node(graph, "third").pk, "explicit")], actor=oscar)
    actions.do_apply_outcome(graph, "s1", "rejected", actor=oscar)  # first, second: shown, not used
    q = Node.objects.get(graph=graph, kind=QUESTION_KIND).pk
    assert answered(graph) == {(q, "third"): 1.0, (q, "first"): 0.25, (q, "second"): 0.25}
    same = memory(graph)
    assert same["third"] == pytest.approx(1.0) and same["first"] == pytest.approx(-0.5)
    # One reported question: too little history for the graph to derive where evidence may cross, so the use
    # counts from near-repeats only, ramped (0.95 - 0.9) / 0.1 = 0.5. The misses only the outcome told (not
    # which note failed) count for the same question only (merged at 0.95): (0.975 - 0.95) / 0.05 = 0.5.
    assert Graph.objects.get(pk=graph.pk).evidence_similarity is None
    repeat = memory(graph, near(0.95))
    assert repeat["third"] == pytest.approx(0.5) and repeat["first"] is None
    assert memory(graph, near(0.975))["first"] == pytest.approx(-0.25, abs=1e-5)  # float32 vectors
    assert all(m is None for m in memory(graph, near(0.8)).values())  # similar, not a repeat: nothing yet
    # Once the graph's reported questions say 0.7-alike questions share their notes (the derived figure),
    # a similar question's use counts from there; a miss still only from the same question.
    Graph.objects.filter(pk=graph.pk).update(evidence_similarity=0.7)
    graph.refresh_from_db()
    repeat = memory(graph, near(0.975))
    assert repeat["third"] == pytest.approx((0.975 - 0.7) / 0.3, abs=1e-5)
    assert repeat["first"] == pytest.approx(-0.25, abs=1e-5)
    similar = memory(graph, near(0.8))  # similar, not a repeat: the use counts, the miss does not
    assert similar["third"] == pytest.approx((0.8 - 0.7) / 0.3) and similar["first"] is None
    assert all(m is None for m in memory(graph, near(0.69)).values())  # below 0.7: nothing


def test_the_not_used_rule(twins, acme, alice, oscar):
    def taught(slug, outcome, used=()):
        graph = make_graph(acme, alice, slug)
        _r, session = session_of(graph, "s", budget=3)
        if used:
            actions.do_record_uses(session, [UseItem("node", node(graph, k).pk, "explicit") for k in used], actor=oscar)
        actions.do_apply_outcome(graph, "s", outcome, actor=oscar)
        return {k: w for (_q, k), w in answered(graph).items()}

    # Accepted: what was not reported is not held against the question.
    assert taught("acc-use", "accepted", ["third"]) == {"third": 1.0}
    # Accepted with no use reported: the shown notes served (halfway up).
    assert taught("acc-none", "accepted") == {"first": 0.75, "second": 0.75, "third": 0.75}
    # Rework with no use reported adds nothing; with a use, the rest count against.
    assert taught("rework-none", "rework") == {}
    assert taught("rework-use", "rework", ["third"]) == {"third": 1.0, "first": 0.25, "second": 0.25}
    # Rejected: everything shown and not used counts against.
    assert taught("rejected", "rejected") == {"first": 0.25, "second": 0.25, "third": 0.25}


def test_near_duplicate_questions_merge(graph, oscar):
    for name, vector in (("a", Q), ("b", near(0.97)), ("c", near(0.9, axis=301))):
        _r, session = session_of(graph, name, vector=vector)
        actions.do_record_uses(session, [UseItem("node", node(graph, "second").pk, "explicit")], actor=oscar)
    questions = Node.objects.filter(graph=graph, kind=QUESTION_KIND)
    assert questions.count() == 2  # Q and its 0.97 repeat are one question; the 0.9 one is another
    assert Edge.objects.filter(graph=graph, edge_type__name=ANSWERED).count() == 2


def test_implicit_detection_feeds_the_same_evidence(graph, oscar):
    _r, session = session_of(graph, "s1", budget=3)
    done = actions.do_record_response(
        session, "The customs clearance paperwork deadline is Friday, per the notes.", actor=oscar
    )
    assert done.status == "applied"
    q = Node.objects.get(graph=graph, kind=QUESTION_KIND).pk
    assert answered(graph) == {(q, "third"): 1.0}
    assert memory(graph)["third"] == pytest.approx(1.0)


def test_rolling_back_the_sessions_that_taught_a_question_restores_the_frozen_ranking(twins, oscar):
    learning, frozen = twins["learning"], twins["frozen"]
    assert ranking(learning) == ranking(frozen)
    for i in range(3):
        _r, session = session_of(learning, f"teach-{i}", budget=3)
        actions.do_record_uses(session, [UseItem("node", node(learning, "third").pk, "explicit")], actor=oscar)
        actions.do_apply_outcome(learning, f"teach-{i}", "accepted", actor=oscar)
    assert keys(learning)[0] == "third" and keys(frozen)[0] == "first"
    batches = UpdateBatch.objects.filter(graph=learning, trigger_session__external_id__startswith="teach-")
    assert {b.kind for b in batches} == {"reinforce", "outcome"}
    for batch in batches.order_by("-pk"):
        result = actions.do_rollback_batch(batch, actor=oscar)
        assert result.conflicts == 0
    assert ranking(learning) == ranking(frozen)


def test_explain_names_the_sessions_that_lifted_or_lowered_a_candidate(graph, oscar):
    _r, session = session_of(graph, "teacher", budget=3)
    actions.do_record_uses(session, [UseItem("node", node(graph, "third").pk, "explicit")], actor=oscar)
    actions.do_apply_outcome(graph, "teacher", "rejected", actor=oscar)
    result, _s = session_of(graph, "asker", budget=3)
    by_key = {node_id: key for key, node_id in Node.objects.filter(graph=graph).values_list("key", "pk")}
    explained = {by_key[c["node"]]: c["learned_from"] for c in explain(result.injection)["candidates"]}
    assert [(r["session"], r["evidence"], r["effect"]) for r in explained["third"]] == [("teacher", "used", "lifted")]
    assert [(r["session"], r["evidence"], r["effect"]) for r in explained["first"]] == [
        ("teacher", "not_used", "lowered")
    ]
    assert explained["fourth"] == []


def test_exploration_only_where_a_near_repeat_failed(graph, oscar):
    first, _s = session_of(graph, "e1")
    again, _s = session_of(graph, "e2")
    assert [i["key"] for i in first.selected] == [i["key"] for i in again.selected] == ["first", "second"]
    actions.do_apply_outcome(graph, "e2", "rejected", actor=oscar)  # shown first, second; nothing used
    after, _s = session_of(graph, "e3")
    shown = [i["key"] for i in after.selected]
    assert "first" not in shown or "second" not in shown  # the failed context gives way to new candidates
    assert set(shown) & {"third", "fourth", "fifth"}


def test_evidence_decays_toward_neutral_and_normalize_leaves_it_alone(graph, oscar):
    from datetime import timedelta

    from graphadmin.models import EdgeType

    _r, session = session_of(graph, "s1", budget=3)
    actions.do_record_uses(session, [UseItem("node", node(graph, "third").pk, "explicit")], actor=oscar)
    actions.do_apply_outcome(graph, "s1", "rejected", actor=oscar)  # first, second: 0.25
    link = Edge.objects.create(
        graph=graph,
        source=node(graph, "first"),
        target=node(graph, "second"),
        edge_type=EdgeType.objects.get(graph=graph, name="related"),
        weight=0.4,
    )
    later = datetime.now(UTC) + timedelta(days=30)
    actions.do_decay(graph, actor=oscar, now=later)
    weights = {k: round(w, 6) for (_q, k), w in answered(graph).items()}
    assert weights == {"third": 0.975, "first": 0.2625, "second": 0.2625}  # 0.5 + (w - 0.5) * 0.95
    assert Edge.objects.get(pk=link.pk).weight == pytest.approx(0.38)  # a link decays as before
    actions.do_normalize(graph, actor=oscar)  # the largest link weight (0.38) becomes 1.0; evidence stays
    assert Edge.objects.get(pk=link.pk).weight == pytest.approx(1.0)
    assert {k: round(w, 6) for (_q, k), w in answered(graph).items()} == weights
