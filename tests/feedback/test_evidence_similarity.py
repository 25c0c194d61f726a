"""The graph's evidence similarity (Graph.evidence_similarity): derived from its own reported questions, set in
the transaction that teaches or rolls back evidence, and read by retrieval as the threshold for positive evidence.

Hand-made question vectors, so every similarity is known exactly (no embedder).
"""

import math

import pytest

from feedback import actions
from feedback.rules import ANSWERED, QUESTION_KIND
from graphadmin.models import Edge, EdgeType, Graph, Node

pytestmark = pytest.mark.django_db
DIM = 384


def unit(*parts):
    v = [0.0] * DIM
    for i, x in parts:
        v[i] = x
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


@pytest.fixture
def graph(acme, alice):
    from graphadmin import actions as core_actions

    return core_actions.do_create_graph(acme, "evidence", "evidence", actor=alice)


def ask(graph, name, vector, used, answered, weight=1.0):
    """A reported question node with positive evidence (weight 1: a reported use) on the notes ``used``."""
    q = Node.objects.create(graph=graph, key=f"question:{name}", kind=QUESTION_KIND, title=name, embedding=vector)
    for note in used:
        Edge.objects.create(graph=graph, source=q, target=note, edge_type=answered, weight=weight)
    return q


def test_pairs_that_used_the_same_notes_set_the_similarity_and_a_graph_without_enough_has_none(graph):
    answered = EdgeType.objects.create(graph=graph, name=ANSWERED)
    notes = [Node.objects.create(graph=graph, key=f"n{i}", title=f"n{i}") for i in range(40)]
    actions._derive_evidence_similarity(graph.pk)
    assert Graph.objects.get(pk=graph.pk).evidence_similarity is None  # no reported question yet
    # Ten topics of three questions each: within a topic the questions are 0.96 alike and used the same note;
    # across topics they share one axis (0.3 alike) and used different notes.
    for topic in range(10):
        for j in range(3):
            v = unit((0, 0.3), (1 + topic, 0.95), (100 + topic * 3 + j, 0.28))
            ask(graph, f"t{topic}q{j}", v, [notes[topic]], answered)
    actions._derive_evidence_similarity(graph.pk)
    derived = Graph.objects.get(pk=graph.pk).evidence_similarity
    assert derived is not None and 0.8 < derived < 1.0  # the topic mates agree; the 0.3-alike pairs never do


def test_too_few_reported_questions_leave_near_repeats_only(graph):
    answered = EdgeType.objects.create(graph=graph, name=ANSWERED)
    note = Node.objects.create(graph=graph, key="n", title="n")
    ask(graph, "a", unit((0, 1.0)), [note], answered)
    ask(graph, "b", unit((0, 1.0), (1, 0.5)), [note], answered)
    actions._derive_evidence_similarity(graph.pk)
    assert Graph.objects.get(pk=graph.pk).evidence_similarity is None


def test_notes_only_shown_in_accepted_sessions_derive_nothing(graph):
    # An outcome-only graph: accepted sessions that reported no use move what they were shown halfway to 1
    # (0.75, 0.875, ...). Similar questions are shown the same notes, so such evidence "agrees" by
    # construction; counted, it set a low threshold and passed shown notes to questions nobody reported.
    answered = EdgeType.objects.create(graph=graph, name=ANSWERED)
    notes = [Node.objects.create(graph=graph, key=f"n{i}", title=f"n{i}") for i in range(5)]
    for j in range(30):
        v = unit((0, 0.8), (100 + j, 0.6))  # every pair 0.64 alike
        ask(graph, f"q{j}", v, notes, answered, weight=0.875)
    actions._derive_evidence_similarity(graph.pk)
    assert Graph.objects.get(pk=graph.pk).evidence_similarity is None
    Edge.objects.filter(graph=graph, edge_type=answered).update(weight=1.0)  # the same notes, now reported used
    actions._derive_evidence_similarity(graph.pk)
    assert Graph.objects.get(pk=graph.pk).evidence_similarity is not None
