"""LangGraph: ``GraphStore`` (a ``BaseStore``: search -> context, put -> remember) for ``compile(store=...)``,
and ``report_node`` (a node sending the answer text and the outcome for the thread's session).
``pip install "graphadmin-client[langgraph]"``.

    store = GraphStore(client=gc, graph=1)
    builder.add_node("report", report_node(gc, 1))
    app = builder.compile(store=store)
    app.invoke({"messages": [("user", "how are edges ranked?")]}, {"configurable": {"thread_id": "run-42"}})

The session is the thread's (``configurable.thread_id``, read when the store or the node runs), else
``use_session(...)``, else a fresh id. A search answered with abstention gives no items.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from ._extras import require
from ._render import items_of
from .client import AsyncGraphClient, GraphClient
from .sessions import pick

require("langgraph", "langgraph")

from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from .langchain import session_of  # noqa: E402

__all__ = ["GraphStore", "report_node", "thread_session"]


def thread_session(config: RunnableConfig | None = None) -> str | None:
    """The session of the running graph: its ``thread_id`` (or ``session``), read from the run's config."""
    if config is None:
        try:
            from langgraph.config import get_config

            config = get_config()
        except RuntimeError:  # outside a runnable context
            return None
    return session_of(config)


def _now() -> datetime:
    return datetime.now(UTC)


class GraphStore(BaseStore):
    """The graph as a LangGraph store. ``search(namespace, query=...)`` is a context call for the thread's
    session (items as ``SearchItem``s: key = node key, value = text, title, node, rank, injection, session);
    ``put(namespace, key, {"text": ...})`` remembers a note under the key ``namespace/.../key``; ``put(..., None)``
    forgets a note this store wrote. ``get`` finds a note by its key among the search hits for it."""

    def __init__(self, *, client: GraphClient | AsyncGraphClient, graph: int, session: str | None = None):
        self.client, self.graph, self.session = client, graph, session
        self._written: dict[str, int] = {}

    def _session(self) -> str:
        return pick(self.session, thread_session())

    # Each op as a plan: (method name, args, kwargs, how to read the answer).
    def _plan(self, op: Op, session: str) -> tuple[str, tuple, dict, Callable[[Any], Result]] | None:
        if isinstance(op, SearchOp):
            if not op.query:
                return None
            now = _now()

            def items(answer: dict) -> list[SearchItem]:
                found = items_of(answer)[op.offset : op.offset + op.limit]
                return [
                    SearchItem(
                        namespace=op.namespace_prefix,
                        key=item["key"],
                        value={
                            "text": item["text"],
                            "title": item["title"],
                            "node": item["node"],
                            "rank": item["rank"],
                            "injection": answer["injection"],
                            "session": answer["session"],
                        },
                        created_at=now,
                        updated_at=now,
                        score=item["total"],
                    )
                    for item in found
                ]

            budget = max(1, min(200, op.offset + op.limit))
            return "context", (self.graph, session, op.query), {"budget": budget}, items
        if isinstance(op, PutOp):
            key = "/".join((*op.namespace, op.key))
            if op.value is None:
                node = self._written.pop(key, None)
                if node is None:
                    return None
                return "forget", (self.graph,), {"nodes": [node], "session": session}, lambda _a: None
            value = dict(op.value)
            text = value.pop("text", None) or value.pop("content", None) or json.dumps(op.value, sort_keys=True)
            kwargs = {"key": key, "session": session, "title": value.get("title"), "kind": value.get("kind")}

            def written(answer: dict) -> None:
                node = answer.get("node") or answer.get("duplicate_of")
                if node:
                    self._written[key] = node

            return "remember", (self.graph, text), kwargs, written
        if isinstance(op, GetOp):
            key = "/".join((*op.namespace, op.key))

            def found(answer: dict) -> Item | None:
                for hit in answer["results"]:
                    if hit["key"] == key:
                        now = _now()
                        value = {"title": hit["title"], "node": hit["node"], "kind": hit["kind"]}
                        return Item(value=value, key=op.key, namespace=op.namespace, created_at=now, updated_at=now)
                return None

            return "search", (self.graph, op.key.replace("/", " ")), {"k": 50}, found
        if isinstance(op, ListNamespacesOp):
            return None
        raise ValueError(f"GraphStore: unknown operation {op!r}")

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        if isinstance(self.client, AsyncGraphClient):
            raise TypeError("GraphStore with an AsyncGraphClient: use the async methods (asearch, aput...)")
        session, out = self._session(), []
        for op in ops:
            plan = self._plan(op, session)
            if plan is None:
                out.append([] if isinstance(op, SearchOp | ListNamespacesOp) else None)
                continue
            method, args, kwargs, read = plan
            out.append(read(getattr(self.client, method)(*args, **kwargs)))
        return out

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        session, out = self._session(), []
        for op in ops:
            plan = self._plan(op, session)
            if plan is None:
                out.append([] if isinstance(op, SearchOp | ListNamespacesOp) else None)
                continue
            method, args, kwargs, read = plan
            call = getattr(self.client, method)
            if isinstance(self.client, AsyncGraphClient):
                answer = await call(*args, **kwargs)
            else:
                answer = await asyncio.to_thread(call, *args, **kwargs)
            out.append(read(answer))
        return out


def _answer_text(state: Any) -> str:
    messages = state.get("messages", []) if isinstance(state, dict) else getattr(state, "messages", [])
    for message in reversed(messages or []):
        if getattr(message, "type", None) == "ai" and not getattr(message, "tool_calls", None):
            content = message.content
            return (
                content
                if isinstance(content, str)
                else " ".join(part.get("text", "") if isinstance(part, dict) else str(part) for part in content)
            )
    return ""


def report_node(
    client: GraphClient | AsyncGraphClient,
    graph: int,
    *,
    outcome: str | None = None,
    outcome_key: str = "outcome",
) -> Callable:
    """A node that reports the thread's session: the last AI message's text (implicit uses are found by the
    server) and the outcome, ``state[outcome_key]`` when the state has one, else ``outcome`` (none: no outcome
    report; send it later with ``client.improve``). Returns no state change."""

    def what(state: Any, config: RunnableConfig) -> tuple[str, str, str | None]:
        session = pick(thread_session(config))
        given = state.get(outcome_key) if isinstance(state, dict) else getattr(state, outcome_key, None)
        return session, _answer_text(state), given or outcome

    if isinstance(client, AsyncGraphClient):

        async def report(state: Any, config: RunnableConfig) -> dict:
            session, text, result = what(state, config)
            await client.report(graph, session, response=text or None, outcome=result)
            return {}

    else:

        def report(state: Any, config: RunnableConfig) -> dict:
            session, text, result = what(state, config)
            client.report(graph, session, response=text or None, outcome=result)
            return {}

    return report
