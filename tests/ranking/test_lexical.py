"""Lexical entry points (issue 23, item 1): BM25 in PostgreSQL beside the vector side, fused into one score.

Real database throughout: the lexical index is kept by the node table's triggers, BM25 is computed by
bench.reference_sql.LEXICAL_HITS_SQL and checked against rank_bm25 (a reference implementation) on the
same lexemes. Embeddings are hand-made (as in test_pipeline.py) so each side's reach is known.
"""

import math
import shutil
from pathlib import Path

import pytest
from django.db import connection
from rank_bm25 import BM25Okapi

from bench import reference_sql as ref
from feedback.imports import do_import_vault
from graphadmin import actions
from graphadmin.models import Node, NodeLexeme, NodeLexicon
from graphadmin.vault.parse import parse_vault
from graphadmin_client import RetrievalRequest
from ranking import queries as sql
from ranking import scoring
from ranking.context import assemble_context
from ranking.explain import explain
from ranking.retrieval import prepare, retrieve

pytestmark = pytest.mark.django_db

DIM = 384
VAULT = Path(__file__).resolve().parent.parent / "fixtures" / "vault"


def unit(*parts):
    v = [0.0] * DIM
    for i, x in parts:
        v[i] = x
    norm = math.sqrt(sum(x * x for x in v))
    return [x / norm for x in v]


Q = unit((0, 1.0))


def near(sim, axis):
    """A unit vector with cosine ``sim`` to Q."""
    return unit((0, sim), (axis, math.sqrt(1 - sim * sim))) if sim < 1 else Q


@pytest.fixture
def lg(acme_graph):
    """Twelve notes: vector hits by similarity, one rare name far from the query vector, one paraphrase
    on the query vector with none of its words."""
    notes = {
        "rare": ("Meeting with Okonkwo", "Okonkwo asked for the quarterly numbers in a note.", near(0.0, 50)),
        "para": ("Where memories live", "Agent recollections are kept in a store of linked notes.", Q),
    }
    for i in range(10):
        notes[f"n{i}"] = (f"Note {i}", f"A note about the weekly planning, item {i}.", near(0.9 - i * 0.05, 10 + i))
    nodes = {
        key: Node.objects.create(graph=acme_graph, key=key, title=t, text=x, embedding=v)
        for key, (t, x, v) in notes.items()
    }
    return {"graph": acme_graph, "nodes": nodes}


def _search(graph, **kw):
    kw.setdefault("vector", Q)
    kw.setdefault("k", 3)
    return {c.row.key: c for c in retrieve(prepare(graph, RetrievalRequest(**kw))).items}


def test_a_rare_name_only_bm25_finds(lg, alice):
    found = _search(lg["graph"], query="What did Okonkwo ask?")
    assert found["rare"].entry == "lexical"
    assert found["rare"].scored.component("lexical").raw == pytest.approx(1.0)  # the query's best BM25
    assert found["rare"].scored.component("vector").raw == pytest.approx(0.0)
    assert found["rare"].bm25 > 0
    # Without the lexical side (its weight 0) the vector side's top 3 never bring it in.
    actions.do_set_policy(lg["graph"], {"coef_lexical": 0.0}, actor=alice)
    assert "rare" not in _search(lg["graph"], query="What did Okonkwo ask?")


def test_a_paraphrase_only_the_vector_finds(lg):
    found = _search(lg["graph"], query="Okonkwo quarterly")
    para = found["para"]
    assert para.entry == "vector" and para.bm25 == 0.0
    assert para.scored.component("lexical").raw == 0.0
    assert para.scored.component("vector").raw == pytest.approx(1.0)


def test_lexical_is_its_own_component_in_the_log_and_the_explanation(lg):
    ctx = assemble_context(
        prepare(lg["graph"], RetrievalRequest(session="lex", query="Okonkwo", vector=Q, k=3, budget=5))
    )
    explained = explain(ctx.injection)
    rare = next(c for c in explained["candidates"] if c["node"] == lg["nodes"]["rare"].pk)
    assert rare["entry"] == "lexical"
    assert rare["components"]["lexical"]["coefficient"] == pytest.approx(0.3)
    assert rare["components"]["lexical"]["contribution"] == pytest.approx(0.3)
    assert rare["features"]["bm25"] > 0 and rare["features"]["lexical"] == pytest.approx(1.0)


def test_a_query_of_stop_words_and_punctuation_falls_back_to_the_vector(lg):
    assert ref.lexical_hits(lg["graph"].pk, "the of and ?! ...", "english", 10) == []
    found = _search(lg["graph"], query="the of and ?! ...")
    assert found and all(c.entry == "vector" and c.bm25 == 0.0 for c in found.values())


def test_a_stop_word_query_through_the_api_is_not_a_500(lg, api, alice):
    response = api(alice).post(
        f"/api/graphs/{lg['graph'].pk}/search/", {"query": "the of and ?!", "vector": Q, "k": 3}, format="json"
    )
    assert response.status_code == 200, response.content
    assert all(hit["components"]["lexical"]["raw"] == 0.0 for hit in response.json()["results"])


def test_bm25_equals_the_reference_and_a_term_in_every_note_scores_nothing(lg):
    graph = lg["graph"]
    docs = {}
    for node_id, lexeme, tf in NodeLexeme.objects.filter(graph=graph).values_list("node_id", "lexeme", "tf"):
        docs.setdefault(node_id, []).extend([lexeme] * tf)
    ids = sorted(NodeLexicon.objects.filter(graph=graph).values_list("node_id", flat=True))
    assert set(docs) <= set(ids) and len(ids) == 12
    reference = BM25Okapi([docs.get(i, []) for i in ids], k1=sql.BM25_K1, b=sql.BM25_B, epsilon=0.0)
    for query in ["Okonkwo asked", "weekly planning item 3", "linked notes store", "quarterly numbers item"]:
        with connection.cursor() as cur:
            cur.execute("SELECT DISTINCT lexeme FROM unnest(to_tsvector('english', %s))", [query])
            lexemes = [r[0] for r in cur.fetchall()]
        expected = dict(zip(ids, reference.get_scores(lexemes), strict=True))
        got = dict(ref.lexical_hits(graph.pk, query, "english", 50))
        assert got == pytest.approx({i: s for i, s in expected.items() if s > 0}), query
    # "note" is in every note ("Note 3", "notes", "a note"): no weight, whatever its count.
    assert ref.lexical_hits(graph.pk, "note", "english", 50) == []
    # A term in more than half of them neither: "planning" is in 10 of 12.
    assert ref.lexical_hits(graph.pk, "planning", "english", 50) == []


def test_fusion_weighted_sum_of_per_query_normalised_scores():
    fused = scoring.fuse_entry({1: 0.9, 2: 0.5, 3: None}, {2: 4.0, 3: 2.0, 4: 1.0, 5: 0.0}, rrf_k=0)
    assert fused == {1: (0.9, 0.0), 2: (0.5, 1.0), 3: (0.0, 0.5), 4: (0.0, 0.25), 5: (0.0, 0.0)}
    total = scoring.NodeScores(scoring.Policy()).score(scoring.NodeCandidate(node_id=2, vector=0.5, lexical=1.0))
    assert total.component("lexical").contribution == pytest.approx(0.3)
    assert total.component("vector").contribution == pytest.approx(0.3)
    # No lexical score at all: every lexical raw is 0 (no division by zero).
    assert scoring.fuse_entry({1: 0.2}, {}, 0) == {1: (0.2, 0.0)}


def test_fusion_reciprocal_rank():
    fused = scoring.fuse_entry({1: 0.9, 2: 0.5, 3: 0.5}, {3: 2.0, 4: 1.0}, rrf_k=60)
    # vector ranks 1, 2, 3 (a tie goes to the lower id); lexical ranks 3 -> 1, 4 -> 2.
    assert fused[1] == (pytest.approx(1.0), 0.0)
    assert fused[2] == (pytest.approx(61 / 62), 0.0)
    assert fused[3] == (pytest.approx(61 / 63), pytest.approx(1.0))
    assert fused[4] == (0.0, pytest.approx(61 / 62))


def test_the_index_follows_create_update_archive_and_delete(lg):
    graph = lg["graph"]
    node = Node.objects.create(graph=graph, key="new", title="Xylophone repair", text="Tuned the xylophone.")
    assert [n for n, _ in ref.lexical_hits(graph.pk, "xylophone", "english", 5)] == [node.pk]
    assert NodeLexeme.objects.get(node=node, lexeme="xylophon").tf == 2
    node.text = "Replaced the marimba."
    node.title = "Marimba"
    node.save()
    assert ref.lexical_hits(graph.pk, "xylophone", "english", 5) == []
    assert [n for n, _ in ref.lexical_hits(graph.pk, "marimba", "english", 5)] == [node.pk]
    Node.objects.filter(pk=node.pk).update(aliases=["Glockenspiel"])  # set-based SQL too
    assert [n for n, _ in ref.lexical_hits(graph.pk, "glockenspiel", "english", 5)] == [node.pk]
    Node.objects.filter(pk=node.pk).update(feedback_weight=0.7)  # other columns leave the index alone
    assert NodeLexicon.objects.filter(graph=graph).count() == 13
    node.archived = True
    node.save()
    assert ref.lexical_hits(graph.pk, "marimba", "english", 5) == []
    assert not NodeLexeme.objects.filter(node_id=node.pk).exists()
    assert NodeLexicon.objects.filter(graph=graph).count() == 12  # N counts active nodes only
    node.delete()
    assert not NodeLexicon.objects.filter(node_id=node.pk).exists()


def test_the_index_follows_an_import(acme_graph, tmp_path):
    shutil.copytree(VAULT, tmp_path / "vault")
    do_import_vault(acme_graph, parse_vault(tmp_path / "vault"), actor="command:test")
    active = Node.objects.filter(graph=acme_graph, archived=False)
    assert NodeLexicon.objects.filter(graph=acme_graph).count() == active.count() > 0
    assert set(NodeLexeme.objects.filter(graph=acme_graph).values_list("node_id", flat=True)) == set(
        active.exclude(title="", text="").values_list("id", flat=True)
    )
    # A lexeme of one note only is found, in that note.
    with connection.cursor() as cur:
        cur.execute(
            "SELECT lexeme, min(node_id) FROM graphadmin_nodelexeme WHERE graph_id = %s AND lexeme ~ '^[a-z]+$'"
            " GROUP BY lexeme HAVING count(*) = 1 ORDER BY lexeme LIMIT 1",
            [acme_graph.pk],
        )
        lexeme, node_id = cur.fetchone()
    assert [n for n, _ in ref.lexical_hits(acme_graph.pk, lexeme, "simple", 5)] == [node_id]


def test_the_graph_text_search_configuration(lg, alice):
    graph = lg["graph"]
    # english stems: "asked" and "asking" are one lexeme; simple keeps the words as written.
    assert ref.lexical_hits(graph.pk, "asking", "english", 5)
    actions.do_update_graph(graph, {"text_search_config": "simple"}, actor=alice)
    graph.refresh_from_db()
    assert NodeLexeme.objects.filter(graph=graph, lexeme="asked").exists()
    assert not NodeLexeme.objects.filter(graph=graph, lexeme="ask").exists()
    assert ref.lexical_hits(graph.pk, "asking", "simple", 5) == []
    assert "rare" in _search(graph, query="asked")


def test_the_text_search_configuration_is_validated(api, alice, acme_graph):
    response = api(alice).patch(f"/api/graphs/{acme_graph.pk}/", {"text_search_config": "klingon"}, format="json")
    assert response.status_code == 400 and "text_search_config" in response.json()


def test_the_lexical_weight_is_a_validated_policy_number(api, oscar, acme_graph):
    response = api(oscar).patch(f"/api/graphs/{acme_graph.pk}/policy/", {"coef_lexical": -1}, format="json")
    assert response.status_code == 400 and "coef_lexical" in response.json()
    response = api(oscar).patch(f"/api/graphs/{acme_graph.pk}/policy/", {"rrf_k": 5000}, format="json")
    assert response.status_code == 400 and "rrf_k" in response.json()
