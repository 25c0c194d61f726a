"""Whole sessions through one adapter against a running graphadmin, run by make test-clients' live test
(tests/clients/test_live_adapters.py) with the Python of the adapter's virtualenv.

    python live_sessions.py ADAPTER PREFIX    (GRAPHADMIN_URL, GRAPHADMIN_TOKEN and GRAPHADMIN_GRAPH set)

Two sessions, PREFIX-1 and PREFIX-2, at once through one adapter instance: question -> context -> answer (a
framework's fake model, no LLM) -> the answer text (the server finds the note it quotes) -> outcome accepted.
Prints {"sessions": [...], "keys": {session: [node keys retrieved]}} as JSON; the product's test checks the
applied batches in the database.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from graphadmin_client import AsyncGraphClient, GraphClient, use_session

QUESTION = "how are edges ranked by weight"
ANSWER = "Edges are ranked by weight, semantic proximity and edge type priority, per the Ranking note."


def langchain(gc: GraphClient, agc: AsyncGraphClient, graph: int, sessions: list[str]) -> dict:
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage

    from graphadmin_client.langchain import GraphRetriever

    retriever = GraphRetriever(client=agc, graph=graph)
    model = FakeMessagesListChatModel(responses=[AIMessage(ANSWER)] * 2)

    async def one(session: str) -> list[str]:
        docs = await retriever.ainvoke(QUESTION, config={"metadata": {"session": session}})
        answer = await model.ainvoke([("system", "\n".join(d.page_content for d in docs)), ("user", QUESTION)])
        await agc.report(graph, docs[0].metadata["session"], response=answer.content, outcome="accepted")
        return [d.id for d in docs]

    async def both():
        return await asyncio.gather(*(one(s) for s in sessions))

    return dict(zip(sessions, asyncio.run(both()), strict=True))


def langgraph(gc: GraphClient, agc: AsyncGraphClient, graph: int, sessions: list[str]) -> dict:
    import operator
    from typing import Annotated, TypedDict

    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, SystemMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    from graphadmin_client.langgraph import GraphStore, report_node

    # The functional form: its types are evaluated here (this module's annotations are strings).
    State = TypedDict(  # noqa: UP013
        "State", {"messages": Annotated[list[AnyMessage], operator.add], "keys": list[str], "outcome": str}, total=False
    )

    model = FakeMessagesListChatModel(responses=[AIMessage(ANSWER)] * 2)

    def respond(state: dict, *, store: BaseStore) -> dict:
        notes = store.search(("notes",), query=state["messages"][-1].content, limit=3)
        system = SystemMessage("\n".join(n.value["text"] for n in notes))
        return {"messages": [model.invoke([system, *state["messages"]])], "keys": [n.key for n in notes]}

    builder = StateGraph(State)
    builder.add_node("respond", respond)
    builder.add_node("report", report_node(gc, graph))
    builder.add_edge(START, "respond")
    builder.add_edge("respond", "report")
    builder.add_edge("report", END)
    app = builder.compile(store=GraphStore(client=gc, graph=graph))

    async def both():
        return await asyncio.gather(
            *(
                app.ainvoke(
                    {"messages": [HumanMessage(QUESTION)], "outcome": "accepted"}, {"configurable": {"thread_id": s}}
                )
                for s in sessions
            )
        )

    return {s: out["keys"] for s, out in zip(sessions, asyncio.run(both()), strict=True)}


def llamaindex(gc: GraphClient, agc: AsyncGraphClient, graph: int, sessions: list[str]) -> dict:
    from llama_index.core.llms.mock import MockLLM
    from llama_index.core.query_engine import RetrieverQueryEngine

    from graphadmin_client.llamaindex import GraphRetriever

    retriever = GraphRetriever(client=agc, graph=graph)
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())

    async def one(session: str) -> list[str]:
        with use_session(session):
            nodes = await retriever.aretrieve(QUESTION)
            await engine.aquery(QUESTION)  # MockLLM: the answer echoes the prompt (the notes)
        await agc.report(graph, session, response=ANSWER, outcome="accepted")
        return [n.node.node_id for n in nodes]

    async def both():
        return await asyncio.gather(*(one(s) for s in sessions))

    return dict(zip(sessions, asyncio.run(both()), strict=True))


def openai_agents(gc: GraphClient, agc: AsyncGraphClient, graph: int, sessions: list[str]) -> dict:
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message, function_call

    from graphadmin_client.openai_agents import GraphContext, GraphHooks, graph_tools

    set_tracing_disabled(True)
    tools, hooks = graph_tools(agc, graph), GraphHooks(agc, graph)

    async def one(session: str) -> list[str]:
        model = ScriptedModel(
            [[function_call("graph_context", {"question": QUESTION}, call_id="c1")], [assistant_message(ANSWER)]]
        )
        agent = Agent(name="helper", instructions="Read graph_context first.", model=model, tools=tools)
        result = await Runner.run(
            agent, QUESTION, context=GraphContext(session=session, outcome="accepted"), hooks=hooks
        )
        notes = [i.output for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"][0]
        return [line.split("key ")[1].rstrip(")") for line in notes.splitlines() if line.startswith("[")]

    async def both():
        return await asyncio.gather(*(one(s) for s in sessions))

    return dict(zip(sessions, asyncio.run(both()), strict=True))


def pydantic_ai(gc: GraphClient, agc: AsyncGraphClient, graph: int, sessions: list[str]) -> dict:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from graphadmin_client.pydantic_ai import GraphDeps, GraphMemory

    def scripted(messages, info) -> ModelResponse:
        if not any(isinstance(p, ToolReturnPart) for m in messages for p in getattr(m, "parts", [])):
            return ModelResponse(parts=[ToolCallPart("graph_context", {"question": QUESTION})])
        return ModelResponse(parts=[TextPart(ANSWER)])

    agent = Agent(FunctionModel(scripted), deps_type=GraphDeps, capabilities=[GraphMemory()])

    async def one(session: str) -> list[str]:
        result = await agent.run(QUESTION, deps=GraphDeps(client=agc, graph=graph, session=session, outcome="accepted"))
        notes = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)][0]
        return [line.split("key ")[1].rstrip(")") for line in notes.splitlines() if line.startswith("[")]

    async def both():
        return await asyncio.gather(*(one(s) for s in sessions))

    return dict(zip(sessions, asyncio.run(both()), strict=True))


ADAPTERS = {f.__name__: f for f in (langchain, langgraph, llamaindex, openai_agents, pydantic_ai)}


def main() -> None:
    adapter, prefix = sys.argv[1], sys.argv[2]
    url, token, graph = (
        os.environ["GRAPHADMIN_URL"],
        os.environ["GRAPHADMIN_TOKEN"],
        int(os.environ["GRAPHADMIN_GRAPH"]),
    )
    sessions = [f"{prefix}-1", f"{prefix}-2"]
    with GraphClient(url, token, timeout=60) as gc:
        agc = AsyncGraphClient(url, token, timeout=60)
        keys = ADAPTERS[adapter](gc, agc, graph, sessions)
    print(json.dumps({"sessions": sessions, "keys": keys}))


if __name__ == "__main__":
    main()
