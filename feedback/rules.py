"""The learning rules, pure: no Django, no database.

The arithmetic every feedback write applies (the set-based statements in ``queries`` compute the
same expressions in SQL, row by row), the period arithmetic of decay, implicit-use detection, path
credit, and the checks an action runs on its input before it touches the database. Tested without
a database (``tests/feedback/test_rules.py``); the database tests check that the statements give
the numbers these functions give.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class FeedbackError(ValueError):
    """Input an action refuses (the API turns it into a 400 naming ``field``)."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class UseItem:
    """One reported item: a node or an edge of the session's graph, with its signal."""

    kind: str  # "node" or "edge"
    id: int
    signal: str
    injection_id: int | None = None


@dataclass(frozen=True)
class ManualValue:
    """A weight an operator sets by hand: ``kind`` node or edge, ``field`` weight or feedback_weight."""

    kind: str
    id: int
    field: str
    value: float


# --------------------------------------------------------------------------------------------------
# Weight arithmetic


def reinforce(weight: float, learning_rate: float) -> float:
    """A use moves a weight up, toward 1: ``w + lr * (1 - w)``."""
    return weight + learning_rate * (1 - weight)


def weaken(weight: float, negative_rate: float) -> float:
    """An explicit negative moves a weight down, toward 0: ``w - rate * w``."""
    return weight - negative_rate * weight


def ema(weight: float, alpha: float, score: float) -> float:
    """The outcome EMA: ``alpha * score + (1 - alpha) * w``."""
    return alpha * score + (1 - alpha) * weight


def decayed(weight: float, rate: float, floor: float) -> float:
    """Decay of an untraversed edge: ``w * rate``, never below ``floor``; a weight at or below it stays."""
    return max(floor, weight * rate) if weight > floor else weight


def decayed_evidence(weight: float, rate: float) -> float:
    """Decay of an ``answered`` edge (evidence around neutral): it fades toward 0.5, ``0.5 + (w - 0.5) * rate``."""
    return 0.5 + (weight - 0.5) * rate


def normalized(weight: float, factor: float) -> float:
    """The ``normalize`` ceiling: ``w * factor`` (``1 / max``), capped at 1.0."""
    return min(1.0, weight * factor)


def decay_period(now: datetime, period_days: int) -> tuple[int, datetime, datetime]:
    """(period index, start of the current period, cutoff) at ``now`` for periods of ``period_days``.

    Periods are counted from the Unix epoch in UTC. The run for period ``p`` decays edges not
    traversed since the start of period ``p - 1`` (the cutoff): no traversal during the last full
    period, nor since.
    """
    index = (now - EPOCH).days // period_days
    start = EPOCH + timedelta(days=index * period_days)
    return index, start, start - timedelta(days=period_days)


# --------------------------------------------------------------------------------------------------
# Checks on an action's input


def bounded(name: str, value: float | None, default: float | None, lo: float, hi: float) -> float | None:
    """A per-call override of a policy rate: ``default`` when not given, else checked against [lo, hi]."""
    if value is None:
        return default
    if not (lo <= value <= hi):
        raise FeedbackError(name, f"must be between {lo} and {hi}.")
    return float(value)


def check_choice(field: str, value: str, choices: Iterable[str]) -> None:
    """Refuse a value outside ``choices``, naming them."""
    choices = tuple(choices)
    if value not in choices:
        raise FeedbackError(field, f"must be one of {', '.join(choices)}.")


def unique_uses(items: list[UseItem], signals: Iterable[str]) -> list[UseItem]:
    """The reported items, each target once, after checking every signal; the same target reported
    with two different signals in one call is refused."""
    signals = tuple(signals)
    for index, item in enumerate(items):
        check_choice(f"items[{index}].signal", item.signal, signals)
    seen: dict[tuple[str, int], str] = {}
    for index, item in enumerate(items):
        previous = seen.setdefault((item.kind, item.id), item.signal)
        if previous != item.signal:
            raise FeedbackError(
                f"items[{index}]", f"{item.kind} {item.id} is reported both {previous} and {item.signal}."
            )
    return list({(i.kind, i.id): i for i in items}.values())


def check_manual_values(values: list[ManualValue]) -> None:
    """Refuse a manual set that names a field the target does not have, a value outside [0, 1], or
    the same weight twice."""
    for index, v in enumerate(values):
        if v.kind == "node" and v.field != "feedback_weight":
            raise FeedbackError(f"values[{index}].field", "nodes have only feedback_weight.")
        if v.field not in ("weight", "feedback_weight"):
            raise FeedbackError(f"values[{index}].field", "must be weight or feedback_weight.")
        if not (0.0 <= v.value <= 1.0):
            raise FeedbackError(f"values[{index}].value", "must be between 0 and 1.")
    if len({(v.kind, v.id, v.field) for v in values}) != len(values):
        raise FeedbackError("values", "each weight may be set once per call.")


# --------------------------------------------------------------------------------------------------
# Credit to the path


def credit_paths(items: list[UseItem], selected: Iterable[tuple[int, int, int | None, dict | None]]) -> list[UseItem]:
    """The edges a report credits besides its items, from the reported nodes' ``selected`` candidates.

    ``selected``: (node id, injection id, edge id, features) of the session's selected candidates of
    the reported nodes. For a node used (explicit or implicit), every edge on its path (``features
    ["path"]``; a log older than the pipeline has its one edge); for a node flagged negative, the
    last edge of each such path. An edge credited both ways (one used node's path, another's wrong
    last step) moves up only: a path that led to something useful is not blamed for a detour. Edges
    reported themselves keep their own signal. Sorted by edge id.
    """
    nodes = {i.id: i for i in items if i.kind == "node"}
    reported_edges = {i.id for i in items if i.kind == "edge"}
    credit: dict[int, UseItem] = {}
    for node_id, injection_id, edge_id, features in selected:
        path = (features or {}).get("path") or ([edge_id] if edge_id else [])
        item = nodes[node_id]
        edges = path[-1:] if item.signal == "negative" else path
        for edge in edges:
            if edge in reported_edges:
                continue
            previous = credit.get(edge)
            if previous is None or (previous.signal == "negative" and item.signal != "negative"):
                credit[edge] = UseItem("edge", edge, item.signal, injection_id)
    return [credit[e] for e in sorted(credit)]


def surfaced(selected: Iterable[tuple[int, int | None, list | None]]) -> tuple[set[int], set[int]]:
    """The nodes and edges a session's injections gave the agent, from its ``selected`` candidates
    ((node id, edge id, path) each): every selected node, and every edge on its path (a log older
    than the pipeline has its one edge). Cut candidates are not passed in: the agent never saw them."""
    nodes: set[int] = set()
    edges: set[int] = set()
    for node_id, edge_id, path in selected:
        nodes.add(node_id)
        edges.update(path or ([edge_id] if edge_id else []))
    return nodes, edges


def first_unsurfaced(items: list[tuple[str, int]], nodes: set[int], edges: set[int]) -> tuple[int, str, int] | None:
    """(index, kind, id) of the first reported item ((kind, id) each) not among the surfaced ``nodes``
    and ``edges``; None when every item was surfaced. A use report may name only what the agent was given."""
    for index, (kind, target_id) in enumerate(items):
        if target_id not in (nodes if kind == "node" else edges):
            return index, kind, target_id
    return None


# --------------------------------------------------------------------------------------------------
# Implicit use detection

WORD = re.compile(r"[a-z0-9][a-z0-9_\-]*[a-z0-9]|[a-z0-9]")
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before being below
    between both but by can could did do does doing down during each few for from further had has have having he
    her here hers him his how i if in into is it its itself just me more most my no nor not now of off on once only
    or other our ours out over own same she should so some such than that the their them then there these they
    this those through to too under until up very was we were what when where which while who whom why will with
    would you your yours note notes use used using""".split()
)


def distinctive_grams(text: str) -> set[str]:
    """Word unigrams (3+ letters, not stopwords) and bigrams of adjacent such words, lower-cased."""
    words = WORD.findall(text.lower())
    grams: set[str] = set()
    previous = None
    for word in words:
        if word in STOPWORDS or len(word) < 3:
            previous = None
            continue
        grams.add(word)
        if previous:
            grams.add(f"{previous} {word}")
        previous = word
    return grams


def detect_implicit(candidates: list[dict], response: str, threshold: float, min_grams: int = 2) -> list[dict]:
    """The candidates a response text used, by overlap of their *distinctive* word n-grams.

    An item's distinctive grams are its title and text grams (``distinctive_grams``) minus those it
    shares with any other surfaced candidate, so boilerplate common to the context proves nothing.
    It counts as used when at least ``threshold`` of them (the policy's ``implicit_threshold``)
    appear in the response, and it has at least ``min_grams`` of them (too little text decides nothing).
    """
    grams = {c["node_id"]: distinctive_grams(f"{c['title']} {c['text']}") for c in candidates}
    seen_by: dict[str, int] = {}
    for node_grams in grams.values():
        for g in node_grams:
            seen_by[g] = seen_by.get(g, 0) + 1
    reply = distinctive_grams(response)
    used = []
    for c in candidates:
        own = {g for g in grams[c["node_id"]] if seen_by[g] == 1}
        if len(own) < min_grams:
            continue
        share = len(own & reply) / len(own)
        if share >= threshold:
            used.append({**c, "share": round(share, 4)})
    return used


def vector_text(vector) -> str | None:
    """A vector in pgvector's text form (bound as a parameter and cast to ``vector``); None for no vector
    or an all-zero one (the hashing embedder's answer to empty text)."""
    if vector is None or not any(vector):
        return None
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


# --------------------------------------------------------------------------------------------------
# Question-conditional evidence (``answered`` edges from a question node to a note)
#
# What a session taught about its question is ledger state: a node of kind ``question`` (its query
# embedded) with one ``answered`` edge to each note the session's evidence is about, whose weight is
# the evidence, neutral at 0.5 (no evidence) and moved by the one write path, so a rollback of the
# batches that moved it gives the neutral weight, hence the untaught ranking, back. The weight reads
# as evidence ``e = 2 * w - 1`` in [-1, 1].

QUESTION_KIND = "question"
ANSWERED = "answered"
# Questions at least this alike are one question (its node is reused): a near-duplicate, tighter than
# the near-repeat threshold (0.9, ranking.scoring.NEGATIVE_SIMILARITY) so two different questions that
# negative evidence may pass between keep their own evidence.
MERGE_SIMILARITY = 0.95

# The evidence a session gives a note, and the weight each moves the ``answered`` edge to:
USED = "used"  # reported used (explicit or detected in the response): full strength at once, w = 1
FLAGGED = "flagged"  # reported wrong: w = 0
NOT_USED = "not_used"  # shown, not used, in a session not accepted: halfway to 0
SHOWN_ACCEPTED = "shown_accepted"  # shown in an accepted session that reported no use at all: halfway to 1
EVIDENCE = (USED, FLAGGED, NOT_USED, SHOWN_ACCEPTED)


def answered_after(weight: float, evidence: str) -> float:
    """The ``answered`` edge's weight after one piece of evidence (the SQL of ``queries.TEACH`` computes the same).

    A use counts at full strength on its first report (w = 1), a flag fully against (w = 0): one agent
    that found the note useful (or wrong) for this question is the strongest evidence there is. A note
    shown and not used by a session that failed moves halfway to 0; one shown in an accepted session
    that reported nothing moves halfway to 1 (the context served, which note did is unknown).
    """
    if evidence == USED:
        return 1.0
    if evidence == FLAGGED:
        return 0.0
    if evidence == NOT_USED:
        return weight / 2.0
    if evidence == SHOWN_ACCEPTED:
        return weight + (1.0 - weight) / 2.0
    raise ValueError(f"unknown evidence {evidence!r}")


def session_evidence(outcome: str | None, shown: Iterable[int], used: Iterable[int], flagged: Iterable[int]) -> dict:
    """What a session's outcome teaches about the notes it was shown and did not report: node id -> evidence.

    Uses and flags are taught when they are reported (``USED``, ``FLAGGED``); this is the rest, at the
    outcome. A session not accepted counts what it was shown and did not use against its question
    (``NOT_USED``), so the next similar question gets other candidates; but not a ``rework`` session that
    reported no use at all (it may simply not report). An accepted session counts nothing against,
    since unreported is not unused (agents report little); if it reported no use at all, its shown
    notes served: ``SHOWN_ACCEPTED``. No outcome: nothing.
    """
    used, flagged = set(used), set(flagged)
    rest = sorted(set(shown) - used - flagged)
    reported = bool(used or flagged)
    if outcome == "accepted":
        return {} if reported else dict.fromkeys(rest, SHOWN_ACCEPTED)
    if outcome == "rejected" or (outcome == "rework" and reported):
        return dict.fromkeys(rest, NOT_USED)
    return {}


def merge_evidence(pairs: Iterable[tuple[int, int, str]]) -> dict[tuple[int, int], str]:
    """One piece of evidence per (question, note): what several injections of a session (or merged
    repeats of one question) said about the same note, the strongest first: used, flagged, not used,
    shown in an accepted session."""
    merged: dict[tuple[int, int], str] = {}
    for question, node, evidence in pairs:
        key = (question, node)
        if key not in merged or EVIDENCE.index(evidence) < EVIDENCE.index(merged[key]):
            merged[key] = evidence
    return merged
