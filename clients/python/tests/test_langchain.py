"""graphadmin_client.langchain against the installed langchain-core, on the stub server."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("langchain_core", reason="the [langchain] extra is not installed in this environment")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_core.runnables import RunnableLambda, RunnablePassthrough  # noqa: E402

from graphadmin_client import AsyncGraphClient, use_session  # noqa: E402
from graphadmin_client.langchain import GraphRetriever, graph_tools  # noqa: E402


def test_documents_carry_the_node_and_the_session_of_the_run(client, stub):
    retriever = GraphRetriever(client=client, graph=3)
    docs = retriever.invoke("how are edges ranked by weight", config={"metadata": {"session": "lc-1"}})
    assert [d.id for d in docs][:2] == ["ranking/weights", "ranking/hnsw"]
    meta = docs[0].metadata
    assert {"node", "score", "rank", "injection", "session"} <= set(meta)
    assert (meta["node"], meta["rank"], meta["session"]) == (11, 1, "lc-1")
    assert stub.seen("POST", "/context/")[0]["json"]["session"] == "lc-1"


def test_the_session_is_read_per_run_never_frozen(client, stub):
    retriever = GraphRetriever(client=client, graph=3)
    retriever.invoke("backups", config={"configurable": {"thread_id": "t-1"}, "metadata": {"thread_id": "t-1"}})
    with use_session("scoped"):
        retriever.invoke("backups")
    fresh = retriever.invoke("backups")[0].metadata["session"]
    sessions = [r["json"]["session"] for r in stub.seen("POST", "/context/")]
    assert sessions[:2] == ["t-1", "scoped"] and sessions[2] == fresh and fresh.startswith("run-")


def test_two_sessions_at_once_through_one_async_retriever(stub):
    retriever = GraphRetriever(client=AsyncGraphClient(stub.url, "t", backoff=0), graph=3)

    async def both():
        return await asyncio.gather(
            retriever.ainvoke("backups", config={"metadata": {"session": "a"}}),
            retriever.ainvoke("backups", config={"metadata": {"session": "b"}}),
        )

    a, b = asyncio.run(both())
    assert (a[0].metadata["session"], b[0].metadata["session"]) == ("a", "b")
    assert sorted(r["json"]["session"] for r in stub.seen("POST", "/context/")) == ["a", "b"]


def test_an_abstained_answer_gives_no_documents(client, stub):
    stub.abstain = True
    assert GraphRetriever(client=client, graph=3).invoke("what is the weather") == []


def test_a_whole_session_with_a_fake_chat_model(client, stub):
    retriever = GraphRetriever(client=client, graph=3)
    model = FakeMessagesListChatModel(responses=[AIMessage("Edges are ranked by weight.")])
    prompt = ChatPromptTemplate.from_messages([("system", "Notes:\n{notes}"), ("user", "{question}")])
    chain = (
        {
            "notes": retriever | RunnableLambda(lambda docs: "\n".join(d.page_content for d in docs)),
            "question": RunnablePassthrough(),
        }
        | prompt
        | model
    )
    answer = chain.invoke("how are edges ranked by weight", config={"metadata": {"session": "lc-run"}})
    sent = client.report(3, "lc-run", response=answer.content, outcome="accepted")
    assert [r["status"] for r in sent.values()] == ["queued", "queued"]
    assert [r["path"] for r in stub.seen("POST")] == [
        "/api/graphs/3/context/",
        "/api/graphs/3/sessions/lc-run/response/",
        "/api/graphs/3/sessions/lc-run/outcome/",
    ]
    assert stub.seen("POST", "/response/")[0]["json"] == {"response": "Edges are ranked by weight."}


def test_the_tools_take_the_session_from_the_run(client, stub):
    context, record_use, improve = graph_tools(client, 3)
    config = {"metadata": {"session": "tools-1"}}
    text = context.invoke({"question": "backups"}, config=config)
    assert text.startswith("[1] Backups (node 13")
    assert record_use.invoke({"nodes": [13]}, config=config) == "queued"
    assert improve.invoke({"outcome": "rework"}, config=config) == "queued"
    assert {r["path"].split("/")[5] for r in stub.seen("POST") if "/sessions/" in r["path"]} == {"tools-1"}
    stub.abstain = True
    assert context.invoke({"question": "weather"}, config=config).startswith("No relevant memory")
