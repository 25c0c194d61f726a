"""A note whose text gives the embedder nothing (Japanese for the hashing embedder, emoji for MiniLM) has no
vector (NULL), and a graph holding one still ranks, searches and assembles context: 200, its similarity absent
(``vector_score`` null; its vector component 0).

Before, such a note embedded to the zero vector, pgvector's cosine distance to it was NaN, and every
request that reached it answered 500.
"""

import math

import pytest

from bench import reference_sql as ref
from feedback.models import InjectionCandidate
from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, Node

pytestmark = pytest.mark.django_db

HASHING, MINILM = "graphadmin.embeddings.HashingEmbedder", "graphadmin.embeddings.MiniLMEmbedder"
CASES = [
    pytest.param(
        ("日本語のノート", "東京は日本の首都です。"), marks=pytest.mark.embedder(HASHING), id="hashing-japanese"
    ),
    pytest.param(("It", ""), marks=pytest.mark.embedder(HASHING), id="hashing-it"),
    pytest.param(("🙂", "🚀🚀"), marks=pytest.mark.embedder(MINILM), id="minilm-emoji"),
]


def _finite(value):
    if isinstance(value, float):
        assert math.isfinite(value)
    elif isinstance(value, dict):
        for v in value.values():
            _finite(v)
    elif isinstance(value, list):
        for v in value:
            _finite(v)


@pytest.mark.parametrize("note", CASES)
def test_a_note_without_tokens_has_no_vector_and_every_retrieval_answers(note, rg, api, ada):
    title, text = note
    graph, nodes = rg["graph"], rg["nodes"]
    [vec] = embed_texts([f"{title}\n\n{text}"])
    assert vec is None
    z = Node.objects.create(graph=graph, key="z", title=title, text=text, embedding=vec)
    Edge.objects.create(graph=graph, source=nodes["a"], target=z, edge_type=rg["types"]["related"], weight=0.95)
    client, base = api(ada), f"/api/graphs/{graph.pk}"

    ranked = client.post(f"{base}/rank/", {"start_nodes": [nodes["a"].pk], "query": "ranking weights"}, format="json")
    assert ranked.status_code == 200, ranked.content
    _finite(ranked.json())
    row = next(r for r in ranked.json()["results"] if r["target"]["id"] == z.pk)
    assert row["components"]["semantic"]["raw"] == 0.0  # no similarity: the component contributes nothing

    found = client.post(f"{base}/search/", {"query": "ranking weights", "k": 50}, format="json")
    assert found.status_code == 200, found.content
    _finite(found.json())
    hit = next(r for r in found.json()["results"] if r["node"] == z.pk)
    assert hit["entry"] == "expansion" and hit["vector_score"] is None  # reached through a's edge; no similarity

    injections = []
    for body in ({"start_nodes": [nodes["a"].pk]}, {}):
        ctx = client.post(
            f"{base}/context/", {"session": f"s-{len(body)}", "query": "ranking weights", **body}, format="json"
        )
        assert ctx.status_code == 201, ctx.content
        _finite(ctx.json())
        injections.append(ctx.json()["injection"])
    candidate = InjectionCandidate.objects.get(injection_id=injections[0], node_id=z.pk)
    assert candidate.features["entry"] == "expansion" and candidate.features["vector"] == 0.0  # frozen: no similarity

    # The note's own title as the query: a query without tokens is no query (400 on search), never NaN,
    # unless the lexical side has its words (the Japanese title: one word to PostgreSQL's parser, in z
    # alone), which then finds the note by BM25 alone.
    empty = client.post(f"{base}/search/", {"query": title}, format="json")
    if ref.lexical_hits(graph.pk, title, graph.text_search_config, 5):
        assert empty.status_code == 200, empty.content
        _finite(empty.json())
        assert [(r["node"], r["entry"]) for r in empty.json()["results"]][:1] == [(z.pk, "lexical")]
    else:
        assert empty.status_code == 400 and "query" in empty.json()
