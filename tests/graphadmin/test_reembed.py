"""Changing the embedder: retrieval refuses vectors of another model (409) until manage.py reembed moves the graph."""

from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from feedback.imports import do_import_vault
from graphadmin.accounts import create_token
from graphadmin.embeddings import get_embedder, stored_models
from graphadmin.models import AuditEvent, Edge, Node, OutboxTask
from graphadmin.vault.parse import parse_vault

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "vault"
HASHING = "graphadmin.embeddings.HashingEmbedder"
MINILM = "graphadmin.embeddings.MiniLMEmbedder"


@pytest.fixture
def hashed_graph(acme_graph, settings):
    """acme_graph imported from the fixture vault with the hashing embedder, then the default configured again."""
    settings.EMBEDDER = HASHING
    do_import_vault(acme_graph, parse_vault(FIXTURE), actor="command:test", embed="sync")
    settings.EMBEDDER = MINILM
    return acme_graph


def _retrieve(client, graph, start):
    base = f"/api/graphs/{graph.pk}"
    return [
        client.post(f"{base}/search/", {"query": "architecture decisions"}, format="json"),
        client.post(f"{base}/rank/", {"start_nodes": [start], "query": "architecture decisions"}, format="json"),
        client.post(f"{base}/context/", {"session": "s1", "query": "architecture decisions"}, format="json"),
    ]


def test_reembed_moves_a_graph_to_the_configured_model_and_retrieval_refuses_mixed_models_before(
    hashed_graph, api, ada
):
    graph, client = hashed_graph, api(ada)
    home = Node.objects.get(graph=graph, key="Home")
    assert stored_models(graph.pk) == ["hashing-v1"]

    # Another model's vectors against a MiniLM query: refused with a clear 409, before any comparison.
    for response in _retrieve(client, graph, home.pk):
        assert response.status_code == 409, response.content
        body = response.json()
        assert body["code"] == "embedding_model_mismatch" and body["stored_models"] == ["hashing-v1"]
        assert (
            body["configured_model"] == "all-MiniLM-L6-v2/onnx-int8"
            and "manage.py reembed --graph memory" in body["detail"]
        )
    # A caller's own vector is the caller's to vouch for, against vectors of one model.
    vector = get_embedder().embed(["architecture decisions"])[0]
    assert client.post(f"/api/graphs/{graph.pk}/search/", {"vector": vector}, format="json").status_code == 200

    # Half-way through a re-embedding the graph holds two models: refused whatever the query.
    Node.objects.filter(pk=home.pk).update(embedding=vector, embedding_model=get_embedder().model_name)
    assert stored_models(graph.pk) == ["all-MiniLM-L6-v2/onnx-int8", "hashing-v1"]
    mixed = client.post(f"/api/graphs/{graph.pk}/search/", {"vector": vector}, format="json")
    assert mixed.status_code == 409 and "several models" in mixed.json()["detail"]

    out = StringIO()
    call_command("reembed", "--graph", "memory", "--org", "acme", "--sync", "--no-progress", stdout=out)
    assert "Re-embedded 8 nodes and 22 edges with all-MiniLM-L6-v2/onnx-int8" in out.getvalue()
    assert stored_models(graph.pk) == ["all-MiniLM-L6-v2/onnx-int8"]
    assert not Node.objects.filter(graph=graph).exclude(embedding_model="all-MiniLM-L6-v2/onnx-int8").exists()
    assert not Edge.objects.filter(graph=graph).exclude(embedding_model="all-MiniLM-L6-v2/onnx-int8").exists()
    event = AuditEvent.objects.filter(action="graph.reembed").get()
    assert (
        event.payload["models_before"] == ["all-MiniLM-L6-v2/onnx-int8", "hashing-v1"] and event.payload["nodes"] == 8
    )

    search, rank, context = _retrieve(client, graph, home.pk)
    assert (search.status_code, rank.status_code, context.status_code) == (200, 200, 201)

    again = StringIO()
    call_command("reembed", "--graph", "memory", "--no-progress", stdout=again)
    assert "Nothing to re-embed." in again.getvalue()


def test_large_graphs_are_reembedded_by_the_celery_task(
    hashed_graph, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.VAULT_IMPORT_SYNC_EMBED_LIMIT = 5
    from graphadmin import tasks

    sent = []
    monkeypatch.setattr(
        tasks.reembed_graph, "apply_async", lambda **kw: sent.append(kw) or type("R", (), {"id": "t-1"})()
    )
    out = StringIO()
    # Issue 26: through the task outbox, sent once the command's transaction commits (here: the test's own).
    with django_capture_on_commit_callbacks(execute=True):
        call_command("reembed", "--graph", "memory", "--no-progress", stdout=out)
    row = OutboxTask.objects.get()
    assert sent == [
        {
            "args": [hashed_graph.pk, "command:reembed"],
            "kwargs": {},
            "retry": False,
            "task_id": row.task_id,
            "queue": "embeddings",
        }
    ]
    assert f"task {row.task_id}" in out.getvalue()
    # What the worker runs:
    assert tasks.reembed_graph(hashed_graph.pk)["nodes"] == 9
    assert stored_models(hashed_graph.pk) == ["all-MiniLM-L6-v2/onnx-int8"]


def test_unknown_graph_is_a_command_error(db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="No graph 'nope'"):
        call_command("reembed", "--graph", "nope")


@pytest.mark.django_db(transaction=True)
def test_the_mcp_tools_refuse_another_models_vectors_with_the_reason(acme_graph, rita, settings, tmp_path):

    from tests.graphadmin.agents.test_mcp_server import error, with_server

    settings.EMBEDDER = HASHING
    do_import_vault(acme_graph, parse_vault(FIXTURE), actor="command:test", embed="sync")
    token = create_token(rita)

    async def script(client):  # the server runs the default embedder (MiniLM)
        return error(await client.call_tool("graph_search", {"graph_id": acme_graph.pk, "query": "architecture"}))

    reason = with_server(token, script, tmp_path)
    assert "were made by hashing-v1" in reason and "manage.py reembed --graph memory" in reason
