"""graphadmin_client.langgraph against the installed langgraph, on the stub server."""

from __future__ import annotations

import asyncio
import operator
from typing import Annotated, TypedDict

import pytest

pytest.importorskip("langgraph", reason="the [langgraph] extra is not installed in this environment")

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel  # noqa: E402
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage  # noqa: E402
from langgraph.graph import END, START, StateGraph  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from graphadmin_client.langgraph import GraphStore, report_node  # noqa: E402


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], operator.add]
    outcome: str


def _app(client, answer: str = "Edges are ranked by weight."):
    model = FakeMessagesListChatModel(responses=[AIMessage(answer)] * 4)

    def respond(state: State, *, store: BaseStore) -> dict:
        question = state["messages"][-1].content
        notes = store.search(("notes",), query=question, limit=3)
        system = SystemMessage("\n".join(n.value["text"] for n in notes) or "no notes")
        return {"messages": [model.invoke([system, *state["messages"]])]}

    builder = StateGraph(State)
    builder.add_node("respond", respond)
    builder.add_node("report", report_node(client, 3))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", "report")
    builder.add_edge("report", END)
    return builder.compile(store=GraphStore(client=client, graph=3))


def test_a_whole_session_in_a_graph_with_the_store_and_the_report_node(client, stub):
    app = _app(client)
    state = {"messages": [HumanMessage("how are edges ranked by weight")], "outcome": "accepted"}
    app.invoke(state, {"configurable": {"thread_id": "lg-1"}})
    assert [(r["path"], (r["json"] or {}).get("session")) for r in stub.seen("POST")] == [
        ("/api/graphs/3/context/", "lg-1"),
        ("/api/graphs/3/sessions/lg-1/response/", None),
        ("/api/graphs/3/sessions/lg-1/outcome/", None),
    ]
    assert stub.seen("POST", "/response/")[0]["json"] == {"response": "Edges are ranked by weight."}
    assert stub.seen("POST", "/outcome/")[0]["json"] == {"outcome": "accepted"}


def test_search_items_and_put_remembers_under_the_namespace_key(client, stub):
    store = GraphStore(client=client, graph=3, session="s")
    found = store.search(("notes",), query="backups", limit=2)
    assert [i.key for i in found] == ["ops/backup", "ranking/weights"]
    assert found[0].value["node"] == 13 and found[0].value["session"] == "s" and found[0].score == 1.0
    store.put(("agent", "facts"), "nightly", {"text": "We back up nightly.", "title": "Nightly"})
    assert stub.remembered == [
        {"text": "We back up nightly.", "key": "agent/facts/nightly", "title": "Nightly", "session": "s"}
    ]
    store.delete(("agent", "facts"), "nightly")
    assert stub.seen("POST", "/forget/")[0]["json"] == {"nodes": [101], "session": "s"}
    stub.abstain = True
    assert store.search(("notes",), query="the weather") == []


def test_two_threads_at_once_through_one_compiled_graph(client, stub):
    app = _app(client)  # nodes run in worker threads: one sync client for both

    async def both():
        await asyncio.gather(
            app.ainvoke({"messages": [HumanMessage("backups")]}, {"configurable": {"thread_id": "x"}}),
            app.ainvoke({"messages": [HumanMessage("backups")]}, {"configurable": {"thread_id": "y"}}),
        )

    asyncio.run(both())
    assert sorted(r["json"]["session"] for r in stub.seen("POST", "/context/")) == ["x", "y"]
    assert sorted(r["path"] for r in stub.seen("POST", "/response/")) == [
        "/api/graphs/3/sessions/x/response/",
        "/api/graphs/3/sessions/y/response/",
    ]
