"""graphadmin_client.llamaindex against the installed llama-index-core, on the stub server."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.core", reason="the [llamaindex] extra is not installed in this environment")

from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.llms.mock import MockLLM  # noqa: E402
from llama_index.core.memory import Memory  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402

from graphadmin_client import AsyncGraphClient, use_session  # noqa: E402
from graphadmin_client.llamaindex import GraphMemoryBlock, GraphRetriever  # noqa: E402


def test_nodes_with_scores_carry_the_graph_node_and_the_session(client, stub):
    nodes = GraphRetriever(client=client, graph=3, session="li-1").retrieve("how are edges ranked by weight")
    assert [n.node.node_id for n in nodes][:2] == ["ranking/weights", "ranking/hnsw"]
    assert nodes[0].score == 1.0 and nodes[0].node.metadata["node"] == 11
    assert nodes[0].node.metadata["session"] == "li-1" and "injection" in nodes[0].node.metadata
    stub.abstain = True
    assert GraphRetriever(client=client, graph=3).retrieve("the weather") == []


def test_a_whole_session_through_a_query_engine_with_mock_llm(client, stub):
    retriever = GraphRetriever(client=client, graph=3)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    with use_session("li-run"):
        answer = engine.query("backups")
    client.report(3, "li-run", response=str(answer), outcome="accepted")
    assert [r["path"] for r in stub.seen("POST")] == [
        "/api/graphs/3/context/",
        "/api/graphs/3/sessions/li-run/response/",
        "/api/graphs/3/sessions/li-run/outcome/",
    ]
    assert stub.seen("POST", "/context/")[0]["json"]["session"] == "li-run"
    assert "pg_dump" in stub.seen("POST", "/response/")[0]["json"]["response"]  # MockLLM echoes its prompt


def test_two_sessions_at_once_through_one_async_retriever(stub):
    retriever = GraphRetriever(client=AsyncGraphClient(stub.url, "t", backoff=0), graph=3)

    async def one(session: str):
        with use_session(session):
            return await retriever.aretrieve("backups")

    async def both():
        return await asyncio.gather(one("a"), one("b"))

    a, b = asyncio.run(both())
    assert (a[0].node.metadata["session"], b[0].node.metadata["session"]) == ("a", "b")


def test_the_memory_block_puts_the_notes_in_the_memory_for_its_session(client, stub):
    memory = Memory.from_defaults(session_id="li-mem", memory_blocks=[GraphMemoryBlock(client=client, graph=3)])
    memory.put(ChatMessage(role="user", content="backups"))
    messages = memory.get()
    assert "pg_dump and the audit anchors" in "\n".join(str(m.content) for m in messages)
    assert stub.seen("POST", "/context/")[0]["json"]["session"] == "li-mem"
    stub.abstain = True
    assert "graph_memory" not in "\n".join(str(m.content) for m in memory.get())
