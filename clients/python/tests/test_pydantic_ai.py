"""graphadmin_client.pydantic_ai against the installed pydantic-ai, with TestModel and FunctionModel."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("pydantic_ai", reason="the [pydantic-ai] extra is not installed in this environment")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.models.test import TestModel  # noqa: E402

from graphadmin_client import AsyncGraphClient  # noqa: E402
from graphadmin_client.pydantic_ai import GraphDeps, GraphMemory, graph_toolset  # noqa: E402


def _scripted(messages, info: AgentInfo) -> ModelResponse:
    """Ask graph_context, then record node 11, then answer with what the context said."""
    returns = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("graph_context", {"question": "how are edges ranked by weight"})])
    if len(returns) == 1:
        return ModelResponse(parts=[ToolCallPart("graph_record_use", {"nodes": [11]})])
    return ModelResponse(parts=[TextPart("Edges are ranked by weight.")])


def test_a_whole_session_with_function_model_and_the_capability(stub):
    client = AsyncGraphClient(stub.url, "t", backoff=0)
    agent = Agent(FunctionModel(_scripted), deps_type=GraphDeps, capabilities=[GraphMemory()])
    deps = GraphDeps(client=client, graph=3, session="pa-1", outcome="accepted")
    result = asyncio.run(agent.run("how are edges ranked?", deps=deps))
    assert result.output == "Edges are ranked by weight."
    assert [r["path"] for r in stub.seen("POST")] == [
        "/api/graphs/3/context/",
        "/api/graphs/3/sessions/pa-1/uses/",
        "/api/graphs/3/sessions/pa-1/response/",
        "/api/graphs/3/sessions/pa-1/outcome/",
    ]
    assert stub.seen("POST", "/response/")[0]["json"] == {"response": "Edges are ranked by weight."}


def test_the_toolset_with_test_model_and_two_runs_at_once(client, stub):
    agent = Agent(TestModel(call_tools=["graph_context"]), deps_type=GraphDeps, toolsets=[graph_toolset()])

    async def both():
        return await asyncio.gather(
            agent.run("q", deps=GraphDeps(client=client, graph=3, session="a")),
            agent.run("q", deps=GraphDeps(client=client, graph=3, session="b")),
        )

    asyncio.run(both())
    assert sorted(r["json"]["session"] for r in stub.seen("POST", "/context/")) == ["a", "b"]
    assert stub.seen("POST", "/response/") == []  # the toolset alone reports nothing after the run


def test_an_abstained_answer_is_the_no_memory_text(client, stub):
    stub.abstain = True
    agent = Agent(TestModel(call_tools=["graph_context"]), deps_type=GraphDeps, capabilities=[GraphMemory()])
    result = asyncio.run(agent.run("weather?", deps=GraphDeps(client=client, graph=3, session="z")))
    returned = [p.content for m in result.all_messages() for p in m.parts if isinstance(p, ToolReturnPart)]
    assert returned[0].startswith("No relevant memory")
    assert stub.seen("POST", "/response/")[0]["path"] == "/api/graphs/3/sessions/z/response/"
