"""Which agent session a call belongs to, read when the call runs (never frozen when an adapter is built).

Each adapter takes the session from, in order: the ``session`` it was given, the framework's own run data
(LangChain's callback metadata ``session``, LangGraph's ``thread_id``, the OpenAI Agents SDK's run context,
pydantic-ai's deps), then ``use_session(...)`` around the call (a context variable: each asyncio task and
thread sees its own). A retrieval with none of them gets a fresh id, returned in its answer.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("graphadmin_session", default=None)


@contextmanager
def use_session(session: str) -> Iterator[str]:
    """Calls made inside the block (in this thread or asyncio task) belong to ``session``."""
    token = _current.set(session)
    try:
        yield session
    finally:
        _current.reset(token)


def current_session() -> str | None:
    """The session of the enclosing ``use_session`` block, if any."""
    return _current.get()


def new_session() -> str:
    return f"run-{uuid.uuid4().hex[:16]}"


def pick(*candidates: object) -> str:
    """The first non-empty candidate as a session id, else the enclosing ``use_session``'s, else a fresh one."""
    for value in candidates:
        if value:
            return str(value)
    return current_session() or new_session()
