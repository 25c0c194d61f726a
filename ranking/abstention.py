"""Abstention: whether a context answer has anything relevant to give. Pure, no Django, no database.

The gate reads the whole answer, never one item: an answer's ``confidence`` is the best entry point's
match with the question, its cosine similarity plus a small share for a strong lexical match
(``entry_match``); the answer abstains when its confidence is below the graph's floor (the policy's
``abstain_floor``, 0 = never). Items reached through the graph or by similar questions' evidence do not
raise it: they are relevant only when the entry points are. A floor on each item instead would drop
the useful note of questions answered lexically or through the graph (docs/ranking.md "Abstention").

The floor is calibrated from the graph's logged answers (ranking.calibration, with the pure
``feedback.rules.floor_at_recall``).
"""

from __future__ import annotations

from collections.abc import Iterable

# A lexical match adds at most LEXICAL_SHARE to an entry point's similarity, half of it at BM25 = BM25_HALF
# (the words of the question found, rare in the graph): BM25 is not bounded, nor comparable across graphs,
# so it saturates; the cosine stays the main term (it is what separates off-topic questions).
LEXICAL_SHARE = 0.1
BM25_HALF = 10.0
# The ways in that make an entry point (ranking.retrieval.Candidate.entry).
ENTRY_WAYS = frozenset({"vector", "lexical", "triplet", "start"})


def entry_match(similarity: float | None, bm25: float) -> float:
    """One entry point's match with the question: its cosine similarity (None, no vector: 0) plus
    LEXICAL_SHARE * bm25 / (bm25 + BM25_HALF)."""
    lexical = bm25 / (bm25 + BM25_HALF) if bm25 > 0 else 0.0
    return (similarity or 0.0) + LEXICAL_SHARE * lexical


def confidence(entries: Iterable[tuple[str, float | None, float]]) -> float:
    """An answer's confidence: the best ``entry_match`` of its entry points, given as (entry, cosine, bm25)
    for every candidate (those that entered by expansion or memory are skipped); 0.0 without one. Rounded
    to 6 places so that the logged value and the one compared with the floor are the same number."""
    best = max((entry_match(sim, bm25) for way, sim, bm25 in entries if way in ENTRY_WAYS), default=0.0)
    return round(max(best, 0.0), 6)


def abstains(confidence_value: float, floor: float, *, directed: bool = False) -> bool:
    """Whether the answer abstains: a floor is set (> 0) and the confidence is below it. A ``directed``
    request (start nodes or anchors: the caller named where to look) never abstains."""
    return floor > 0 and not directed and confidence_value < floor
