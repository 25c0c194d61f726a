"""pydantic-ai: ``graph_toolset()`` (a ``FunctionToolset`` whose tools read the run's deps, ``GraphDeps``: the
client, the graph and the session) and ``GraphMemory`` (a capability: the toolset, and after the run the answer
text and the outcome reported). ``pip install "graphadmin-client[pydantic-ai]"``.

    agent = Agent(model, deps_type=GraphDeps, capabilities=[GraphMemory()])
    deps = GraphDeps(client=gc, graph=1, session="run-42")
    result = await agent.run("how are edges ranked?", deps=deps)
    await gc.improve(1, "run-42", "accepted")   # or GraphDeps(..., outcome="accepted")

The session lives in the deps, one per run: two runs at once through one agent keep their own sessions.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from ._extras import require
from ._render import render
from .client import AsyncGraphClient, GraphClient
from .sessions import current_session, new_session

require("pydantic_ai", "pydantic-ai")

from pydantic_ai import RunContext  # noqa: E402
from pydantic_ai.capabilities import AbstractCapability  # noqa: E402
from pydantic_ai.toolsets import FunctionToolset  # noqa: E402

__all__ = ["GraphDeps", "graph_toolset", "GraphMemory"]


@dataclass
class GraphDeps:
    """A run's dependencies: the client, the graph, the agent session (fresh by default) and, when known at the
    start, the outcome to report after the run."""

    client: GraphClient | AsyncGraphClient
    graph: int
    session: str = field(default_factory=lambda: current_session() or new_session())
    budget: int | None = None
    outcome: str | None = None


async def _call(deps: GraphDeps, method: str, *args: Any, **kwargs: Any) -> Any:
    if isinstance(deps.client, AsyncGraphClient):
        return await getattr(deps.client, method)(*args, **kwargs)
    return await asyncio.to_thread(getattr(deps.client, method), *args, **kwargs)


async def graph_context(ctx: RunContext[GraphDeps], question: str) -> str:
    """The notes of the knowledge graph relevant to a question: read them before answering.

    Args:
        question: The user's question, in their words.
    """
    deps = ctx.deps
    return render(await _call(deps, "context", deps.graph, deps.session, question, budget=deps.budget))


async def graph_record_use(ctx: RunContext[GraphDeps], nodes: list[int]) -> str:
    """Report the notes your answer used (their node ids), so the graph learns what helps.

    Args:
        nodes: The node ids of the notes you used.
    """
    deps = ctx.deps
    return (await _call(deps, "record_use", deps.graph, deps.session, [{"node": n} for n in nodes]))["status"]


async def graph_improve(ctx: RunContext[GraphDeps], outcome: str) -> str:
    """Report how the session ended.

    Args:
        outcome: accepted, rework or rejected.
    """
    deps = ctx.deps
    return (await _call(deps, "improve", deps.graph, deps.session, outcome))["status"]


def graph_toolset() -> FunctionToolset[GraphDeps]:
    """The tools ``graph_context``, ``graph_record_use`` and ``graph_improve``, for an agent whose deps are
    ``GraphDeps``."""
    return FunctionToolset([graph_context, graph_record_use, graph_improve])


def _output_text(output: Any) -> str:
    if output is None:
        return ""
    if isinstance(output, str):
        return output
    dump = getattr(output, "model_dump_json", None)
    return dump() if dump else str(output)


@dataclass
class GraphMemory(AbstractCapability[GraphDeps]):
    """The graph as an agent capability: its tools, and after each run the report of the run's session (the
    output as the answer text, the deps' ``outcome`` when given). ``tools=False`` keeps only the reporting."""

    tools: bool = True

    @classmethod
    def get_serialization_name(cls) -> str | None:
        return None  # holds no spec-serializable configuration

    def get_toolset(self) -> FunctionToolset[GraphDeps] | None:
        return graph_toolset() if self.tools else None

    async def after_run(self, ctx: RunContext[GraphDeps], *, result: Any) -> Any:
        deps = ctx.deps
        if isinstance(deps, GraphDeps):
            text = _output_text(getattr(result, "output", None))
            await _call(deps, "report", deps.graph, deps.session, response=text or None, outcome=deps.outcome)
        return result
