"""LlamaIndex: ``GraphRetriever`` (a ``BaseRetriever`` returning ``NodeWithScore``, sync and async) and
``GraphMemoryBlock`` (a memory block for ``llama_index.core.memory.Memory``).
``pip install "graphadmin-client[llamaindex]"``.

    retriever = GraphRetriever(client=gc, graph=1)
    with use_session("run-42"):
        nodes = retriever.retrieve("how are edges ranked?")
        answer = RetrieverQueryEngine.from_args(retriever, llm=llm).query("how are edges ranked?")
    gc.report(1, "run-42", response=str(answer), outcome="accepted")

The session is the retriever's ``session`` when given, else ``use_session(...)`` around the call, else a fresh
id (in each node's metadata); the memory block takes the ``Memory``'s ``session_id``. An answer that abstained
gives no nodes (the memory block: no text, so ``Memory`` leaves the block out).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ._extras import require
from ._render import items_of, render
from .client import AsyncGraphClient, GraphClient
from .sessions import pick

require("llama_index.core", "llamaindex")

from llama_index.core.base.base_retriever import BaseRetriever  # noqa: E402
from llama_index.core.base.llms.types import ChatMessage  # noqa: E402
from llama_index.core.memory.memory import BaseMemoryBlock  # noqa: E402
from llama_index.core.schema import NodeWithScore, QueryBundle, TextNode  # noqa: E402
from pydantic import Field  # noqa: E402

__all__ = ["GraphRetriever", "GraphMemoryBlock", "nodes_with_scores"]


def nodes_with_scores(answer: dict) -> list[NodeWithScore]:
    """A context answer's items as ``NodeWithScore`` (node id = the graph node's key); none when it abstained."""
    return [
        NodeWithScore(
            node=TextNode(
                id_=item["key"],
                text=item["text"],
                metadata={
                    "node": item["node"],
                    "key": item["key"],
                    "title": item["title"],
                    "rank": item["rank"],
                    "injection": answer["injection"],
                    "session": answer["session"],
                },
            ),
            score=item["total"],
        )
        for item in items_of(answer)
    ]


class GraphRetriever(BaseRetriever):
    """The graph's budgeted context for a query, as scored nodes; each call logs an injection for the session."""

    def __init__(
        self,
        *,
        client: GraphClient | AsyncGraphClient,
        graph: int,
        session: str | None = None,
        budget: int | None = None,
        **kwargs: Any,
    ):
        self.client, self.graph, self.session, self.budget = client, graph, session, budget
        super().__init__(**kwargs)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        if isinstance(self.client, AsyncGraphClient):
            raise TypeError("GraphRetriever with an AsyncGraphClient: call aretrieve(), or give a GraphClient")
        answer = self.client.context(self.graph, pick(self.session), query_bundle.query_str, budget=self.budget)
        return nodes_with_scores(answer)

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        session = pick(self.session)
        if isinstance(self.client, AsyncGraphClient):
            answer = await self.client.context(self.graph, session, query_bundle.query_str, budget=self.budget)
        else:
            call = self.client.context
            answer = await asyncio.to_thread(call, self.graph, session, query_bundle.query_str, budget=self.budget)
        return nodes_with_scores(answer)


def _text(message: ChatMessage) -> str:
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else str(content or "")


class GraphMemoryBlock(BaseMemoryBlock[str]):
    """The notes of the graph relevant to the conversation's last user message, as text in the ``Memory``'s
    template. The session is the block's ``session`` when given, else the ``Memory``'s ``session_id``."""

    name: str = Field(default="graph_memory", description="The name of the memory block.")
    client: Any = Field(description="A GraphClient or an AsyncGraphClient.")
    graph: int = Field(description="The graph's id.")
    session: str | None = Field(default=None, description="The agent session (default: the Memory's session_id).")
    budget: int | None = Field(default=None, description="Items (default: the graph's policy).")

    async def _aget(self, messages: list[ChatMessage] | None = None, **block_kwargs: Any) -> str:
        question = next((_text(m) for m in reversed(messages or []) if str(m.role.value) == "user"), "")
        if not question:
            return ""
        session = pick(self.session, block_kwargs.get("session_id"))
        if isinstance(self.client, AsyncGraphClient):
            answer = await self.client.context(self.graph, session, question, budget=self.budget)
        else:
            answer = await asyncio.to_thread(self.client.context, self.graph, session, question, budget=self.budget)
        return render(answer) if items_of(answer) else ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Messages leaving the short-term memory are not written to the graph (``client.remember`` does that)."""
