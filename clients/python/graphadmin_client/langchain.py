"""LangChain: ``GraphRetriever`` (a ``BaseRetriever``, sync and async) and ``graph_tools`` (context, record_use,
improve as tools). ``pip install "graphadmin-client[langchain]"``.

    retriever = GraphRetriever(client=gc, graph=1)
    docs = retriever.invoke("how are edges ranked?", config={"metadata": {"session": "run-42"}})
    answer = (prompt | llm).invoke({"docs": docs, ...})
    gc.report(1, docs[0].metadata["session"], response=answer.content, outcome="accepted")

The session is read per call: the retriever's ``session`` when given, else the run's callback metadata
(``session``, or LangGraph's ``thread_id``), else ``use_session(...)``, else a fresh id (in each document's
metadata). An answer that abstained gives no documents.
"""

from __future__ import annotations

import asyncio

from ._extras import require
from ._render import items_of, render
from .client import AsyncGraphClient, GraphClient
from .sessions import pick

require("langchain_core", "langchain")

from langchain_core.callbacks import (  # noqa: E402
    AsyncCallbackManagerForRetrieverRun,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langchain_core.tools import BaseTool, StructuredTool  # noqa: E402
from pydantic import ConfigDict  # noqa: E402

__all__ = ["GraphRetriever", "graph_tools", "session_of", "documents"]


def session_of(config_or_metadata: dict | None) -> str | None:
    """The session named by a run: metadata ``session`` or ``thread_id`` (LangGraph copies ``configurable``'s
    ``thread_id`` into the metadata), or a config's ``configurable.thread_id``."""
    data = config_or_metadata or {}
    metadata = data.get("metadata") or data
    configurable = data.get("configurable") or {}
    return (
        metadata.get("session")
        or metadata.get("thread_id")
        or configurable.get("session")
        or configurable.get("thread_id")
    )


def documents(answer: dict) -> list[Document]:
    """A context answer's items as Documents (``id`` = node key); none when the answer abstained."""
    return [
        Document(
            id=item["key"],
            page_content=item["text"],
            metadata={
                "node": item["node"],
                "key": item["key"],
                "title": item["title"],
                "score": item["total"],
                "vector_score": item.get("vector_score"),
                "rank": item["rank"],
                "injection": answer["injection"],
                "session": answer["session"],
            },
        )
        for item in items_of(answer)
    ]


class GraphRetriever(BaseRetriever):
    """The graph's budgeted context for a question, as Documents; the call logs an injection for the session."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: GraphClient | AsyncGraphClient
    graph: int
    session: str | None = None
    budget: int | None = None

    def _session(self, run_manager) -> str:
        return pick(self.session, session_of(getattr(run_manager, "metadata", None)))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        if isinstance(self.client, AsyncGraphClient):
            raise TypeError("GraphRetriever with an AsyncGraphClient: call ainvoke(), or give a GraphClient")
        answer = self.client.context(self.graph, self._session(run_manager), query, budget=self.budget)
        return documents(answer)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        client = self.client
        session = self._session(run_manager)
        if isinstance(client, AsyncGraphClient):
            answer = await client.context(self.graph, session, query, budget=self.budget)
        else:  # a sync client: in a thread, so the event loop is not blocked
            answer = await asyncio.to_thread(client.context, self.graph, session, query, budget=self.budget)
        return documents(answer)


def graph_tools(client: GraphClient | AsyncGraphClient, graph: int, *, budget: int | None = None) -> list[BaseTool]:
    """Three tools for a tool-calling model: ``graph_context`` (the notes for a question, as text),
    ``graph_record_use`` (the node ids it used), ``graph_improve`` (the session's outcome). The session is the
    run's (metadata ``session`` or ``thread_id``), read at each call."""
    is_async = isinstance(client, AsyncGraphClient)

    def _session(config: RunnableConfig | None) -> str:
        return pick(session_of(config))

    def context(question: str, config: RunnableConfig) -> str:
        return render(client.context(graph, _session(config), question, budget=budget))

    async def acontext(question: str, config: RunnableConfig) -> str:
        return render(await client.context(graph, _session(config), question, budget=budget))

    def record_use(nodes: list[int], config: RunnableConfig) -> str:
        return client.record_use(graph, _session(config), [{"node": n} for n in nodes])["status"]

    async def arecord_use(nodes: list[int], config: RunnableConfig) -> str:
        return (await client.record_use(graph, _session(config), [{"node": n} for n in nodes]))["status"]

    def improve(outcome: str, config: RunnableConfig) -> str:
        return client.improve(graph, _session(config), outcome)["status"]

    async def aimprove(outcome: str, config: RunnableConfig) -> str:
        return (await client.improve(graph, _session(config), outcome))["status"]

    specs = [
        ("graph_context", context, acontext, "The notes of the knowledge graph relevant to a question."),
        ("graph_record_use", record_use, arecord_use, "Report the node ids of the notes your answer used."),
        ("graph_improve", improve, aimprove, "Report the outcome of the session: accepted, rework or rejected."),
    ]
    return [
        StructuredTool.from_function(
            func=None if is_async else sync, coroutine=coro if is_async else None, name=name, description=doc
        )
        for name, sync, coro, doc in specs
    ]
