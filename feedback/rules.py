"""The learning rules, pure: no Django, no database.

The arithmetic every feedback write applies (the set-based statements in ``queries.weights`` compute the
same expressions in SQL, row by row), the period arithmetic of decay, implicit-use detection, path
credit, and the checks an action runs on its input before it touches the database. Tested without
a database (``tests/feedback/test_rules.py``); the database tests check that the statements give
the numbers these functions give.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import NamedTuple

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class Refusal(NamedTuple):
    """Input an action refuses: the field and why. The checks below return it (None: accepted) and the action
    raises it as the domain's ``graphadmin.errors.InputError`` (a 400 naming the field in every medium): this
    module imports nothing of the project, so it raises no error class of its own."""

    field: str
    message: str


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


def out_of_bounds(name: str, value: float | None, lo: float, hi: float) -> Refusal | None:
    """A per-call override of a policy rate outside [lo, hi] (None: not given, or within)."""
    if value is not None and not (lo <= value <= hi):
        return Refusal(name, f"must be between {lo} and {hi}.")
    return None


def bounded(value: float | None, default: float | None) -> float | None:
    """A per-call override of a policy rate (checked by ``out_of_bounds``): ``default`` when not given."""
    return default if value is None else float(value)


def not_one_of(field: str, value: str, choices: Iterable[str]) -> Refusal | None:
    """A value outside ``choices``, refused naming them (None: one of them)."""
    choices = tuple(choices)
    if value not in choices:
        return Refusal(field, f"must be one of {', '.join(choices)}.")
    return None


def refused_uses(items: list[UseItem], signals: Iterable[str]) -> Refusal | None:
    """The first refusal of a use report: an unknown signal (every item checked first), then the same target
    reported with two different signals in one call (None: accepted)."""
    signals = tuple(signals)
    for index, item in enumerate(items):
        refusal = not_one_of(f"items[{index}].signal", item.signal, signals)
        if refusal is not None:
            return refusal
    seen: dict[tuple[str, int], str] = {}
    for index, item in enumerate(items):
        previous = seen.setdefault((item.kind, item.id), item.signal)
        if previous != item.signal:
            return Refusal(f"items[{index}]", f"{item.kind} {item.id} is reported both {previous} and {item.signal}.")
    return None


def unique_uses(items: list[UseItem]) -> list[UseItem]:
    """The reported items (accepted by ``refused_uses``), each target once."""
    return list({(i.kind, i.id): i for i in items}.values())


def refused_manual_values(values: list[ManualValue]) -> Refusal | None:
    """The first refusal of a manual set: a field the target does not have, a value outside [0, 1], or the same
    weight twice (None: accepted)."""
    for index, v in enumerate(values):
        if v.kind == "node" and v.field != "feedback_weight":
            return Refusal(f"values[{index}].field", "nodes have only feedback_weight.")
        if v.field not in ("weight", "feedback_weight"):
            return Refusal(f"values[{index}].field", "must be weight or feedback_weight.")
        if not (0.0 <= v.value <= 1.0):
            return Refusal(f"values[{index}].value", "must be between 0 and 1.")
    if len({(v.kind, v.id, v.field) for v in values}) != len(values):
        return Refusal("values", "each weight may be set once per call.")
    return None


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


# A sentence of a note quoted or closely paraphrased in a response is a use even when the rest of the note is
# not: at least QUOTE_MIN_GRAMS of the sentence's distinctive grams (the note's own, as below), and at least
# QUOTE_SHARE of them (or the policy's threshold, if higher) in the response. A note of several sentences of
# which the answer kept one covers too little of the whole note to pass the note-wide share.
QUOTE_MIN_GRAMS = 4
QUOTE_SHARE = 0.6
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def detect_implicit(candidates: list[dict], response: str, threshold: float, min_grams: int = 2) -> list[dict]:
    """The candidates a response text used, by overlap of their *distinctive* word n-grams.

    An item's distinctive grams are its title and text grams (``distinctive_grams``) minus those it
    shares with any other surfaced candidate, so boilerplate common to the context proves nothing.
    It counts as used when at least ``threshold`` of them (the policy's ``implicit_threshold``)
    appear in the response, and it has at least ``min_grams`` of them (too little text decides nothing);
    or when one of its sentences is quoted or closely paraphrased (``QUOTE_MIN_GRAMS``, ``QUOTE_SHARE``).
    ``share`` is the larger of the two figures.
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
        share = len(own & reply) / len(own) if len(own) >= min_grams else 0.0
        quoted = 0.0
        for sentence in SENTENCE_END.split(c["text"] or ""):
            mine = distinctive_grams(sentence) & own
            if len(mine) >= QUOTE_MIN_GRAMS:
                quoted = max(quoted, len(mine & reply) / len(mine))
        if share >= threshold or quoted >= max(threshold, QUOTE_SHARE):
            used.append({**c, "share": round(max(share, quoted), 4)})
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
# The link the graph learns between notes used together in accepted sessions (feedback.actions.do_link_co_used).
CO_USED = "co_used"
# The link types the learning writes itself: neither counts in a note's degree (ranking.scoring.link_specificity),
# which measures how much of a hub the vault's own links make a note. A note agents used with others gains co_used
# links; counted, they faded the links its author wrote, and what agents used lost the context those links carried
# (LoCoMo 50, full reports: a test question's useful note, reached over a ``follows`` link of a used note, fell
# from rank 3 to 23). docs/decisions/0013-degree-counts-authored-links.md
LEARNED_LINK_TYPES = (ANSWERED, CO_USED)
# Questions at least this alike are one question (its node is reused): a near-duplicate, tighter than
# the near-repeat threshold (0.9, ranking.scoring.NEAR_REPEAT_SIMILARITY) so two different questions that
# a use may pass between keep their own evidence. Flags and what only an outcome said count from this
# similarity only (ranking.scoring.SAME_QUESTION).
MERGE_SIMILARITY = 0.95

# The evidence a session gives a note, and the weight each moves the ``answered`` edge to:
USED = "used"  # reported used (explicit or detected in the response): full strength at once, w = 1
FLAGGED = "flagged"  # reported wrong: w = 0
NOT_USED = "not_used"  # shown, not used, in a session not accepted: halfway to 0
SHOWN_ACCEPTED = "shown_accepted"  # shown in an accepted session that reported no use at all: halfway to 1
EVIDENCE = (USED, FLAGGED, NOT_USED, SHOWN_ACCEPTED)
# The weight of a reported use (``answered_after(w, USED)``). The evidence similarity is derived from these
# only: notes shown in accepted sessions (``SHOWN_ACCEPTED``, below 1 however often) agree between two similar
# questions by construction (similar questions are shown the same notes), so counting them would let an
# outcome-only graph derive a low threshold from its own retrieval and pass that evidence to questions
# nobody reported. docs/decisions/0009-evidence-similarity-from-reported-uses.md
USED_WEIGHT = 1.0


def answered_after(weight: float, evidence: str) -> float:
    """The ``answered`` edge's weight after one piece of evidence (``queries.weights.TEACH`` computes the same).

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


# What a derived evidence similarity needs: pairs of reported questions (each question's nearest others), and
# the share of pairs at or above the threshold that used a note in common.
EVIDENCE_MIN_PAIRS = 20
EVIDENCE_PRECISION = 0.5


# Derived from reported uses only: docs/decisions/0009-evidence-similarity-from-reported-uses.md
def evidence_similarity(
    pairs: Iterable[tuple[float, bool]], precision: float = EVIDENCE_PRECISION, min_pairs: int = EVIDENCE_MIN_PAIRS
) -> float | None:
    """The lowest similarity at which two reported questions mostly used the same notes, or None.

    ``pairs``: (cosine of two distinct reported questions, whether a note was used for both). Walking the pairs
    from the most alike down, the figure is the lowest similarity at which the pairs at or above it still
    agreed at least ``precision`` of the time (counted once ``min_pairs // 4`` pairs are in): above it, what
    agents used for one question is more likely than not useful for the other, so evidence may cross between
    them; below it, it would push in notes more often wrong than right (in a conversation between the same two
    people, questions about different events are alike in words). None with fewer than ``min_pairs`` pairs, or
    when even the most alike pairs disagree: too little of the graph's own history (near-repeats only).
    """
    ordered = sorted(pairs, key=lambda p: -p[0])
    if len(ordered) < min_pairs:
        return None
    agreed = 0
    found = None
    for i, (similarity, agree) in enumerate(ordered, start=1):
        agreed += 1 if agree else 0
        last_of_its_value = i == len(ordered) or ordered[i][0] != similarity  # "at or above" takes ties whole
        if last_of_its_value and i >= min_pairs // 4 and agreed / i >= precision:
            found = similarity
    return None if found is None else round(float(found), 6)


# --- abstention: the floor of a context answer's confidence (ranking.abstention) ---------------------------------


@dataclass(frozen=True)
class FloorCalibration:
    """A floor calibrated at a target recall, with what it does to the answers it was calibrated on."""

    floor: float
    target_recall: float
    positives: int  # answers whose items were used or whose session was accepted
    negatives: int  # answers of rejected sessions with nothing used
    recall: float  # share of the positives kept (confidence >= floor)
    abstained_negatives: float | None  # share of the negatives that abstain (None: no negatives)

    def as_dict(self) -> dict:
        """The calibration as plain values (audit note, command output, API answer)."""
        return {
            "floor": self.floor,
            "target_recall": self.target_recall,
            "positives": self.positives,
            "negatives": self.negatives,
            "recall": self.recall,
            "abstained_negatives": self.abstained_negatives,
        }


def binomial_tail(n: int, p: float, r: int) -> float:
    """P(X >= r) for X ~ Binomial(n, p)."""
    return max(0.0, 1.0 - sum(math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(r)))


def floor_at_recall(
    positives: Sequence[float], negatives: Sequence[float], target_recall: float, assurance: float = 0.9
) -> FloorCalibration:
    """The highest floor that keeps at least ``target_recall`` of the answers like the ``positives`` (confidences
    of answers that helped) with probability ``assurance``, rounded down to 4 places; the ``negatives`` (answers
    that did not) are only measured.

    A distribution-free lower tolerance bound: the floor is the r-th lowest positive, r the largest with
    P(Binomial(n, 1 - target) >= r) >= assurance (the share of future useful answers below the r-th of n is
    Beta(r, n - r + 1)). The plain quantile (r = floor((1 - target) * n) + 1) keeps the target only half the
    time on a sample of a few dozen; with too few positives for the assurance, r = 1: the lowest positive.
    Raises ValueError without positives or for a target or an assurance outside (0, 1].
    """
    if not 0 < target_recall <= 1 or not 0 < assurance <= 1:
        raise ValueError("target_recall and assurance must be in (0, 1].")
    ordered = sorted(max(p, 0.0) for p in positives)
    if not ordered:
        raise ValueError("No positive answers to calibrate on.")
    n, r = len(ordered), 1
    while r < n and binomial_tail(n, 1 - target_recall, r + 1) >= assurance:
        r += 1
    floor = math.floor(ordered[r - 1] * 10_000) / 10_000
    kept = sum(p >= floor for p in ordered) / n
    neg = list(negatives)
    abstained = sum(v < floor for v in neg) / len(neg) if neg else None
    return FloorCalibration(floor, target_recall, n, len(neg), kept, abstained)
