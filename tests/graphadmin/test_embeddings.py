"""Embedders: the hashing embedder, the sentence-transformers adapter, and import embedding in a task.

The semantic default (MiniLMEmbedder) has its own file, test_embeddings_minilm.py.
"""

import math
import shutil
import time
from pathlib import Path

import pytest

from feedback.imports import do_import_vault
from graphadmin.embeddings import (
    HashingEmbedder,
    ModelNotInstalled,
    SentenceTransformerEmbedder,
    find_sentence_model,
    get_embedder,
)
from graphadmin.models import Edge, Node
from graphadmin.vault.apply import embed_pending
from graphadmin.vault.parse import parse_vault
from tests.conftest import queued_work

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vault"

CACHE_A = "Caching hot keys in Redis reduces read latency; the cache is invalidated when records change."
CACHE_B = (
    "Our cache layer keeps frequently read records in memory so reads skip the database; "
    "stale cache entries are invalidated."
)
BUDGET = "The quarterly hiring budget was approved by finance after the offsite meeting in March."


def cosine(a, b):
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


def test_hashing_embedder_is_deterministic_unit_length_and_topical(settings):
    embedder = HashingEmbedder()
    a, b, c = embedder.embed([CACHE_A, CACHE_B, BUDGET])
    assert len(a) == settings.EMBEDDING_DIM and a == HashingEmbedder().embed([CACHE_A])[0]
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-9)
    assert cosine(a, b) > cosine(a, c) + 0.1 and cosine(a, b) > cosine(b, c) + 0.1


@pytest.mark.parametrize("text", ["", "   ", "It", "It is to be.", "日本語で書かれたノート"])
def test_hashing_embedder_gives_no_vector_for_text_without_a_content_word(text):
    # Never a zero vector: it has no direction and pgvector's cosine distance to it is NaN.
    assert HashingEmbedder().embed([text, "caching"])[0] is None


def test_configured_embedder_must_match_the_schema_dimension(settings):
    settings.EMBEDDER = "tests.graphadmin.test_embeddings.TinyEmbedder"
    with pytest.raises(ValueError, match="gives 8 dimensions"):
        get_embedder()


class TinyEmbedder(HashingEmbedder):
    def __init__(self):
        super().__init__(dim=8)


def test_missing_model_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ModelNotInstalled, match="No sentence-transformers model at"):
        find_sentence_model(str(tmp_path / "nope"))


def _installed_model():
    try:
        import sentence_transformers  # noqa: F401

        return find_sentence_model("")
    except (ImportError, ModelNotInstalled):
        return None


@pytest.mark.skipif(
    _installed_model() is None,
    reason="sentence-transformers is not installed (the optional extra: pip install -e '.[sentence-transformers]')",
)
def test_sentence_transformer_embedder_loads_offline_and_ranks_by_meaning(settings):
    embedder = SentenceTransformerEmbedder(model=_installed_model())
    assert embedder.dim == settings.EMBEDDING_DIM == 384
    a, b, c = embedder.embed([CACHE_A, CACHE_B, BUDGET])
    assert math.isclose(sum(x * x for x in a), 1.0, rel_tol=1e-5)
    assert cosine(a, b) > 0.5 > cosine(a, c)
    # A paraphrase with no shared words still lands close: what the hashing embedder cannot do.
    p, q = embedder.embed(["How do I reset my password?", "I forgot my login credentials."])
    assert cosine(p, q) > cosine(p, c)


def test_api_refuses_a_vector_of_the_wrong_dimension(api, oscar, acme_graph, settings):
    url = f"/api/graphs/{acme_graph.pk}/nodes/"
    bad = api(oscar).post(url, {"key": "k", "title": "t", "embedding": [0.1] * 3}, format="json")
    assert bad.status_code == 400 and "Expected 384 numbers, got 3" in str(bad.data["embedding"])
    good = api(oscar).post(url, {"key": "k", "title": "t", "embedding": [0.1] * settings.EMBEDDING_DIM}, format="json")
    assert good.status_code == 201


def test_api_refuses_an_all_zero_vector_naming_the_field(api, oscar, acme_graph, rg, settings):
    url = f"/api/graphs/{acme_graph.pk}/nodes/"
    zero = [0.0] * settings.EMBEDDING_DIM
    bad = api(oscar).post(url, {"key": "k", "title": "t", "embedding": zero}, format="json")
    assert bad.status_code == 400 and list(bad.data) == ["embedding"] and "all-zero" in str(bad.data["embedding"])
    nodes = rg["nodes"]
    edge = api(oscar).post(
        f"/api/graphs/{acme_graph.pk}/edges/",
        {"source": nodes["b"].pk, "target": nodes["g"].pk, "edge_type": "related", "triplet_embedding": zero},
        format="json",
    )
    assert edge.status_code == 400 and list(edge.data) == ["triplet_embedding"]
    assert not Node.objects.filter(graph=acme_graph, key="k").exists()


def test_the_database_refuses_a_zero_vector_from_any_writer(acme_graph, settings):
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError, match="node_embedding_not_zero"), transaction.atomic():
        Node.objects.create(graph=acme_graph, key="z", title="z", embedding=[0.0] * settings.EMBEDDING_DIM)


def test_api_records_the_model_a_caller_names_for_its_vector(api, oscar, acme_graph, settings):
    url = f"/api/graphs/{acme_graph.pk}/nodes/"
    vec = [0.1] * settings.EMBEDDING_DIM
    named = api(oscar).post(
        url, {"key": "n", "title": "t", "embedding": vec, "embedding_model": "bge-small"}, format="json"
    )
    anonymous = api(oscar).post(url, {"key": "a", "title": "t", "embedding": vec}, format="json")
    assert named.status_code == anonymous.status_code == 201
    assert named.data["embedding_model"] == "bge-small" and anonymous.data["embedding_model"] == ""
    alone = api(oscar).patch(f"{url}{anonymous.data['id']}/", {"embedding_model": "x"}, format="json")
    assert alone.status_code == 400 and "embedding_model" in alone.data


def test_large_import_leaves_vectors_to_the_task_which_fills_them_in_batches(
    acme_graph, settings, django_capture_on_commit_callbacks
):
    settings.VAULT_IMPORT_SYNC_EMBED_LIMIT = 5
    settings.EMBED_BATCH_SIZE = 4
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        result = do_import_vault(acme_graph, parse_vault(FIXTURE), actor="command:test")
    assert result.embedding == "task" and len(queued_work(callbacks)) == 1
    assert Node.objects.filter(graph=acme_graph, embedding__isnull=True).count() == 9
    assert embed_pending(acme_graph.pk) == {"nodes": 9, "edges": 22}
    assert not Node.objects.filter(graph=acme_graph, embedding__isnull=True).exists()
    assert not Edge.objects.filter(graph=acme_graph, triplet_embedding__isnull=True).exists()
    home = Node.objects.get(graph=acme_graph, key="Home")
    expected = get_embedder().embed([f"{home.title}\n\n{home.text}"])[0]
    assert cosine(list(home.embedding), expected) > 0.9999
    assert home.embedding_model == get_embedder().model_name == "all-MiniLM-L6-v2/onnx-int8"
    assert embed_pending(acme_graph.pk) == {"nodes": 0, "edges": 0}  # idempotent


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_embedding_task_runs_on_a_real_worker_after_commit(celery_worker_process, acme_graph, tmp_path):
    from django.core.management import call_command

    vault = tmp_path / "vault"
    shutil.copytree(FIXTURE, vault)
    call_command("import_vault", str(vault), "--graph", "memory", "--org", "acme", "--embed", "task")
    deadline = time.monotonic() + 60
    while (
        Node.objects.filter(graph=acme_graph, embedding__isnull=True).exists()
        or Edge.objects.filter(graph=acme_graph, triplet_embedding__isnull=True).exists()
    ):
        assert time.monotonic() < deadline, celery_worker_process.log_path.read_text()[-3000:]
        time.sleep(0.3)
    assert Node.objects.filter(graph=acme_graph).count() == 9
