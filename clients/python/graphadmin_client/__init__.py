"""graphadmin's Python client: ``GraphClient`` (sync) and ``AsyncGraphClient`` (async), the same methods.

    from graphadmin_client import GraphClient

    with GraphClient("http://127.0.0.1:8000", token="...") as gc:
        ctx = gc.context(1, "run-42", "how do we rank edges?", budget=5)
        answer = my_llm(ctx["items"])
        gc.report(1, "run-42", response=answer, outcome="accepted")

Loads httpx only. The framework adapters are submodules behind extras: ``graphadmin_client.langchain``,
``.langgraph``, ``.llamaindex``, ``.openai_agents``, ``.pydantic_ai`` (``pip install "graphadmin-client[...]"``).
"""

from .client import ApiError, AsyncGraphClient, GraphClient, ServerError
from .sessions import current_session, use_session
from .types import (
    Candidate,
    Comparison,
    Component,
    ContextItem,
    ContextResult,
    EdgeKey,
    Explanation,
    MemoryAnswer,
    MemoryLink,
    Outcome,
    Report,
    RetrievalRequest,
    SearchHit,
    SearchResult,
    UseItem,
    abstained,
)

__all__ = [
    "GraphClient",
    "AsyncGraphClient",
    "RetrievalRequest",
    "ApiError",
    "ServerError",
    "Component",
    "SearchHit",
    "SearchResult",
    "ContextItem",
    "ContextResult",
    "EdgeKey",
    "UseItem",
    "Report",
    "MemoryLink",
    "MemoryAnswer",
    "Candidate",
    "Comparison",
    "Explanation",
    "Outcome",
    "abstained",
    "use_session",
    "current_session",
]
