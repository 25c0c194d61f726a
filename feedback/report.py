"""The typed report: what an agent reported about a session, validated once, then stored and applied as is.

A ``Report`` is built at intake (``feedback.reports``: the REST API and the MCP tools) from the
serializer's validated data, after the session's checks and with its items resolved to live node
and edge ids of the graph. It is stored in the outbox as its ``payload`` (``feedback.outbox.record``),
read back by the drain (``Report.from_row``) and applied by one action (``actions.do_apply_report``).
It never changes shape in between: the payload is the report's own fields, JSON.

Between the 202 and the drain the graph can change (an item archived meanwhile): that is the one
check the drain repeats, for a whole batch of reports at once (``stale_items``), in the same words
and the same error class as the intake's (``unknown_item``), so a refused report reads like a 400.
"""

from __future__ import annotations

from dataclasses import dataclass

from graphadmin.errors import InputError

from .rules import UseItem

KINDS = ("uses", "response", "outcome")


@dataclass(frozen=True, slots=True)
class Report:
    """One accepted report. ``kind`` is ``uses`` (``items``, ``learning_rate``, ``source``),
    ``response`` (``response``) or ``outcome`` (``outcome``, ``alpha``); ``key`` is its idempotency
    key, which its UpdateBatch takes, so the report applies once whatever delivers it."""

    kind: str
    key: str | None
    items: tuple[UseItem, ...] = ()
    learning_rate: float | None = None
    source: str = "api"
    response: str = ""
    outcome: str = ""
    alpha: float | None = None

    def payload(self) -> dict:
        """The JSON stored in the outbox row (the same keys as before the typed report: old rows read back)."""
        if self.kind == "uses":
            source = {} if self.source == "api" else {"source": self.source}
            return {"items": [_item(i) for i in self.items], "learning_rate": self.learning_rate, **source}
        if self.kind == "response":
            return {"response": self.response}
        return {"outcome": self.outcome, "alpha": self.alpha}

    @classmethod
    def from_payload(cls, kind: str, key: str, payload: dict) -> Report:
        """The report an outbox row (or a message of an older version) stored."""
        if kind == "uses":
            items = tuple(UseItem(i["kind"], i["id"], i["signal"], i.get("injection_id")) for i in payload["items"])
            return cls(
                kind, key, items, learning_rate=payload.get("learning_rate"), source=payload.get("source") or "api"
            )
        if kind == "response":
            return cls(kind, key, response=payload["response"])
        return cls(kind, key, outcome=payload["outcome"], alpha=payload.get("alpha"))

    @classmethod
    def from_row(cls, row) -> Report:
        return cls.from_payload(row.kind, row.idempotency_key, row.payload)


def _item(item: UseItem) -> dict:
    out = {"kind": item.kind, "id": item.id, "signal": item.signal}
    if item.injection_id is not None:
        out["injection_id"] = item.injection_id
    return out


class UnknownItem(InputError):
    """An item that is not a live node or edge of the graph: at intake (a 400 naming the item) and
    when the drain finds it archived since the 202 (the row refused with this text). ``field`` names
    the item as the actions' errors do (``items[2].node``)."""

    def __init__(self, index: int, kind: str, pk):
        self.message = f"Unknown {kind} {pk} in this graph."
        super().__init__({"items": {index: {kind: [self.message]}}})
        self.field = f"items[{index}].{kind}"


def unknown_item(index: int, kind: str, pk) -> UnknownItem:
    return UnknownItem(index, kind, pk)


def stale_items(reports: list[Report], live_nodes: set[int], live_edges: set[int]) -> dict[int, UnknownItem]:
    """Position in ``reports`` -> the error of its first item no longer live (pure: the live ids are
    read once per drained batch by ``queries.reports.live_targets``)."""
    out = {}
    for position, report in enumerate(reports):
        for index, item in enumerate(report.items):
            if item.id not in (live_nodes if item.kind == "node" else live_edges):
                out[position] = unknown_item(index, item.kind, item.id)
                break
    return out
