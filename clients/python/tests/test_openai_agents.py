"""graphadmin_client.openai_agents against the installed openai-agents, with its scripted test model."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("agents", reason="the [openai-agents] extra is not installed in this environment")

from agents import Agent, Runner, set_tracing_disabled  # noqa: E402
from agents.testing import ScriptedModel, assistant_message, function_call  # noqa: E402

from graphadmin_client import AsyncGraphClient  # noqa: E402
from graphadmin_client.openai_agents import GraphContext, GraphHooks, graph_tools, mcp_server  # noqa: E402

set_tracing_disabled(True)  # no trace export: offline


def _agent(client, answer: str = "Edges are ranked by weight.") -> Agent:
    model = ScriptedModel(
        [
            [function_call("graph_context", {"question": "how are edges ranked by weight"}, call_id="c1")],
            [function_call("graph_record_use", {"nodes": [11]}, call_id="c2")],
            [assistant_message(answer)],
        ]
    )
    return Agent(name="helper", instructions="Read graph_context first.", model=model, tools=graph_tools(client, 3))


def test_a_whole_session_with_the_scripted_model(stub):
    client = AsyncGraphClient(stub.url, "t", backoff=0)
    context = GraphContext(session="oa-1", outcome="accepted")
    result = asyncio.run(
        Runner.run(_agent(client), "how are edges ranked?", context=context, hooks=GraphHooks(client, 3))
    )
    assert result.final_output == "Edges are ranked by weight."
    assert [r["path"] for r in stub.seen("POST")] == [
        "/api/graphs/3/context/",
        "/api/graphs/3/sessions/oa-1/uses/",
        "/api/graphs/3/sessions/oa-1/response/",
        "/api/graphs/3/sessions/oa-1/outcome/",
    ]
    assert stub.seen("POST", "/uses/")[0]["json"] == {"items": [{"node": 11}]}
    assert stub.seen("POST", "/response/")[0]["json"] == {"response": "Edges are ranked by weight."}


def test_two_runs_at_once_keep_their_sessions_and_a_sync_client_works(client, stub):
    hooks = GraphHooks(client, 3)

    async def both():
        return await asyncio.gather(
            Runner.run(_agent(client), "q", context=GraphContext(session="a"), hooks=hooks),
            Runner.run(_agent(client), "q", context={"session": "b"}, hooks=hooks),
        )

    asyncio.run(both())
    assert sorted(r["json"]["session"] for r in stub.seen("POST", "/context/")) == ["a", "b"]
    assert sorted(r["path"] for r in stub.seen("POST", "/response/")) == [
        "/api/graphs/3/sessions/a/response/",
        "/api/graphs/3/sessions/b/response/",
    ]
    assert stub.seen("POST", "/outcome/") == []  # no outcome given: the caller sends it later


def test_an_abstained_answer_is_the_no_memory_text(client, stub):
    stub.abstain = True
    agent = _agent(client)
    result = asyncio.run(Runner.run(agent, "weather?", context=GraphContext(session="z")))
    outputs = [i.output for i in result.new_items if getattr(i, "type", "") == "tool_call_output_item"]
    assert outputs[0].startswith("No relevant memory")


def test_the_mcp_server_carries_the_bearer_token():
    server = mcp_server("http://127.0.0.1:8765/mcp", "tok")
    assert server.params["headers"] == {"Authorization": "Bearer tok"} and server.name == "graphadmin"
