"""The OpenAI Agents SDK: ``graph_tools`` (function tools taking the run context, where the session lives),
``GraphHooks`` (``RunHooks``: when the run ends, the answer text and the outcome are reported) and
``mcp_server`` (the product's MCP endpoint as ``MCPServerStreamableHttp`` with the bearer token).
``pip install "graphadmin-client[openai-agents]"``.

    agent = Agent(name="helper", instructions="Read graph_context first.", tools=graph_tools(gc, 1))
    ctx = GraphContext(session="run-42")
    result = await Runner.run(agent, "how are edges ranked?", context=ctx, hooks=GraphHooks(gc, 1))
    await gc.improve(1, "run-42", "accepted")   # or GraphContext(session=..., outcome="accepted")

The run's context is a ``GraphContext`` (or any object with a ``session`` attribute, or a dict with a
``"session"`` key); without one, ``use_session(...)`` around the run, else a fresh id kept on the context.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ._extras import require
from ._render import render
from .client import AsyncGraphClient, GraphClient
from .sessions import current_session, new_session

require("agents", "openai-agents")

from agents import FunctionTool, RunContextWrapper, RunHooks, function_tool  # noqa: E402

__all__ = ["GraphContext", "graph_tools", "GraphHooks", "mcp_server", "session_of"]


@dataclass
class GraphContext:
    """A run context carrying the agent session (and, when known at the start, the outcome to report)."""

    session: str = field(default_factory=new_session)
    outcome: str | None = None


def session_of(wrapper: RunContextWrapper[Any] | None) -> str:
    """The session of a run: its context's ``session`` (attribute or key), else ``use_session``'s, else a fresh
    one (written back onto a context that can hold it, so the run's later calls share it)."""
    context = getattr(wrapper, "context", None)
    found = context.get("session") if isinstance(context, dict) else getattr(context, "session", None)
    if found:
        return str(found)
    session = current_session() or new_session()
    if isinstance(context, dict):
        context["session"] = session
    elif context is not None:
        try:
            context.session = session
        except AttributeError:
            pass
    return session


async def _call(client: GraphClient | AsyncGraphClient, method: str, *args: Any, **kwargs: Any) -> Any:
    if isinstance(client, AsyncGraphClient):
        return await getattr(client, method)(*args, **kwargs)
    return await asyncio.to_thread(getattr(client, method), *args, **kwargs)


def graph_tools(client: GraphClient | AsyncGraphClient, graph: int, *, budget: int | None = None) -> list[FunctionTool]:
    """``graph_context`` (the notes for a question, as text; "no relevant memory" when the answer abstained),
    ``graph_record_use`` (the node ids the answer used) and ``graph_improve`` (the session's outcome)."""

    @function_tool
    async def graph_context(ctx: RunContextWrapper[Any], question: str) -> str:
        """The notes of the knowledge graph relevant to a question: read them before answering.

        Args:
            question: The user's question, in their words.
        """
        return render(await _call(client, "context", graph, session_of(ctx), question, budget=budget))

    @function_tool
    async def graph_record_use(ctx: RunContextWrapper[Any], nodes: list[int]) -> str:
        """Report the notes your answer used (their node ids), so the graph learns what helps.

        Args:
            nodes: The node ids of the notes you used.
        """
        answer = await _call(client, "record_use", graph, session_of(ctx), [{"node": n} for n in nodes])
        return answer["status"]

    @function_tool
    async def graph_improve(ctx: RunContextWrapper[Any], outcome: str) -> str:
        """Report how the session ended.

        Args:
            outcome: accepted, rework or rejected.
        """
        return (await _call(client, "improve", graph, session_of(ctx), outcome))["status"]

    return [graph_context, graph_record_use, graph_improve]


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump_json", None)
    return dump() if dump else str(output)


class GraphHooks(RunHooks):
    """Run hooks reporting the session when an agent produces its final output: the output as the answer text
    (the server finds the notes it used), and the outcome when known (``outcome`` here, or the context's
    ``outcome``); otherwise send it later with ``client.improve``."""

    def __init__(self, client: GraphClient | AsyncGraphClient, graph: int, *, outcome: str | None = None):
        self.client, self.graph, self.outcome = client, graph, outcome

    async def on_agent_end(self, context: Any, agent: Any, output: Any) -> None:
        session = session_of(context)
        inner = getattr(context, "context", None)
        given = inner.get("outcome") if isinstance(inner, dict) else getattr(inner, "outcome", None)
        text = _output_text(output)
        await _call(self.client, "report", self.graph, session, response=text or None, outcome=given or self.outcome)


def mcp_server(base_url: str, token: str, *, name: str = "graphadmin", **kwargs: Any) -> Any:
    """The product's MCP tools for an agent (``Agent(mcp_servers=[...])``): ``MCPServerStreamableHttp`` on
    ``base_url`` (``make run``'s MCP server: http://127.0.0.1:8765/mcp) with ``Authorization: Bearer <token>``.
    Use it inside ``async with``, as every SDK MCP server."""
    from agents.mcp import MCPServerStreamableHttp

    params = {"url": base_url, "headers": {"Authorization": f"Bearer {token}"}}
    return MCPServerStreamableHttp(params=params, name=name, **kwargs)
