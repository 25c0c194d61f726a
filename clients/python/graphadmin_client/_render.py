"""A context answer as text for a model (tools, memory blocks): one block per item, or the "no memory" line."""

from __future__ import annotations

from .types import ContextResult, abstained

NO_MEMORY = "No relevant memory in the graph for this question."


def render(answer: ContextResult | dict) -> str:
    items = [] if abstained(answer) else answer.get("items", [])
    if not items:
        return NO_MEMORY
    return "\n\n".join(f"[{i['rank']}] {i['title']} (node {i['node']}, key {i['key']})\n{i['text']}" for i in items)


def items_of(answer: ContextResult | dict) -> list[dict]:
    """The answer's items, none when it abstained (a missing ``abstained`` is false)."""
    return [] if abstained(answer) else list(answer.get("items", []))
