"""The shapes on the wire: the request object both sides build, and the answers as TypedDicts.

The API's OpenAPI schema (``/api/schema/``) is the reference; ``RetrievalRequest`` is the one definition of a
retrieval request: the client sends ``body()`` and the server's serializers (ranking.serializers) build it again.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NotRequired, TypedDict

Outcome = Literal["accepted", "rework", "rejected"]


@dataclass(frozen=True)
class RetrievalRequest:
    """One retrieval request (search or context), the same object on both sides of the wire.

    The client builds it from its keyword arguments and sends ``body()``; the server's serializers
    (ranking.serializers) validate the JSON and build it again; REST, MCP and the ranking stages read
    it (ranking.retrieval.prepare). ``session``, ``budget_unit`` and ``budget`` are context's (search
    sends none of them).
    """

    query: str = ""
    vector: list[float] | None = None
    start_nodes: tuple[int, ...] = ()
    anchors: tuple[int, ...] = ()
    exclude: tuple[int, ...] = ()
    persona: dict[str, float] = field(default_factory=dict)
    k: int = 50
    hops: int | None = None
    session: str | None = None
    budget_unit: Literal["items", "tokens"] = "items"
    budget: int | None = None

    def __post_init__(self):
        # Lists and None from callers become tuples and {}: one shape for the rest of the pipeline.
        for name in ("start_nodes", "anchors", "exclude"):
            object.__setattr__(self, name, tuple(getattr(self, name) or ()))
        object.__setattr__(self, "persona", dict(self.persona or {}))

    def body(self, *names: str) -> dict:
        """The JSON body: the fields ``names`` (all when none), empty and None values left out."""
        data = asdict(self)
        picked = {n: data[n] for n in (names or data)}
        return {k: list(v) if isinstance(v, tuple) else v for k, v in picked.items() if v not in (None, (), {})}


SEARCH_FIELDS = ("query", "vector", "start_nodes", "anchors", "exclude", "persona", "k", "hops")


class Component(TypedDict):
    raw: float
    coefficient: float
    contribution: float


class SearchHit(TypedDict):
    rank: int
    node: int
    stable_id: str
    key: str
    title: str
    kind: str
    vector_score: float
    bm25: NotRequired[float]
    hops: int | None
    entry: str
    path: list[int]
    total: float
    components: dict[str, Component]


class SearchResult(TypedDict):
    policy_revision: int
    results: list[SearchHit]


class ContextItem(TypedDict):
    rank: int
    node: int
    key: str
    title: str
    kind: str
    text: str
    tokens: int
    total: float
    hops: int | None
    entry: str
    path: list[int]
    edge: int | None
    edge_type: str | None
    vector_score: NotRequired[float | None]


class ContextResult(TypedDict):
    """A context answer. ``abstained`` (when the server sends it) is true when nothing passed the graph's floor:
    ``items`` is then empty, the injection still logged."""

    injection: int
    session: str
    session_created: bool
    mode: str
    policy_revision: int
    budget_unit: str
    budget: int
    spent: int
    considered: int
    items: list[ContextItem]
    vectors_pending: NotRequired[int]  # the graph's vectors still being written: 0 when it is ready
    confidence: NotRequired[float | None]
    abstained: NotRequired[bool]


class EdgeKey(TypedDict):
    source: int
    target: int
    type: str


class UseItem(TypedDict, total=False):
    """One used item: ``node`` (id) or ``edge`` (id or EdgeKey); signal ``explicit`` (default) or ``negative``."""

    node: int
    edge: int | EdgeKey
    signal: Literal["explicit", "negative", "implicit"]


class Report(TypedDict):
    """The answer to a feedback report: ``queued`` (with task id and key), ``duplicate`` (with batch), or a no-op
    status."""

    status: str
    task_id: NotRequired[str]
    idempotency_key: NotRequired[str]
    batch: NotRequired[int | None]
    reason: NotRequired[str]


class MemoryLink(TypedDict, total=False):
    """A link from a remembered note: ``node`` (id or key) and an existing edge ``type`` (default related)."""

    node: int | str
    type: str


class MemoryAnswer(TypedDict):
    """The answer to remember, link and forget: the status, the batch, the node and edges written."""

    status: str
    batch: int | None
    node: NotRequired[int]
    edges: list[int]
    unresolved: list[dict[str, Any]]
    duplicate_of: NotRequired[int]
    similarity: NotRequired[float]


class Candidate(TypedDict):
    rank: int
    selected: bool
    node: int
    edge: int | None
    hops: int | None
    tokens: int
    total: float
    features: dict[str, Any]
    components: dict[str, Component]


class Comparison(TypedDict):
    i: int
    j: int
    total_i: float
    total_j: float
    difference: float
    components: list[dict[str, Any]]


class Explanation(TypedDict):
    injection: int
    session: str
    query: str
    mode: str
    policy_revision: int
    budget_unit: str
    budget: int
    spent: int
    created_at: str
    candidates: list[Candidate]
    comparison: Comparison | None


def abstained(answer: ContextResult | dict) -> bool:
    """Whether a context answer abstained (nothing relevant): its ``abstained`` flag, false when the server has
    none."""
    return bool(answer.get("abstained", False))
