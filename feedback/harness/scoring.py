"""The one scorer of the learning harnesses: a ranked list of notes against the notes that answer the question.

Used by the synthetic world (node ids), the demo's history and the over-HTTP evaluation (note keys):
hit@5 = 1 if a useful note is among the top 5; recall@5 = useful notes among the top 5 / min(5, useful);
MRR@5 = 1 / rank of the first useful note among the top 5 (0 if none); ``rr`` = 1 / rank of the first
useful note anywhere in the list (``reciprocal_rank``: the synthetic world's MRR, not cut at 5).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable

K = 5
METRICS = ("hit5", "recall5", "mrr5")


def ranked_keys(items: list[dict]) -> list[str]:
    """The distinct note keys of a context answer's selected items, in rank order."""
    return list(dict.fromkeys(i["key"] for i in sorted(items, key=lambda i: i["rank"])))


def score(keys: list[Hashable], useful: Iterable[Hashable]) -> dict:
    """hit@5, recall@5 (useful found in the top 5 / min(5, useful)) and MRR@5 of one ranked list."""
    wanted = set(useful)
    top = keys[:K]
    found = [k for k in top if k in wanted]
    return {
        "hit5": 1.0 if found else 0.0,
        "recall5": len(found) / min(K, len(wanted)) if wanted else 0.0,
        "mrr5": reciprocal_rank(top, wanted),
    }


def reciprocal_rank(keys: list[Hashable], useful: Iterable[Hashable]) -> float:
    """1 / rank of the first useful entry of ``keys`` (0.0 if none)."""
    wanted = set(useful)
    return next((1.0 / rank for rank, k in enumerate(keys, start=1) if k in wanted), 0.0)


def mean(values: Iterable[float]) -> float:
    """The mean of ``values``; 0.0 for none."""
    values = list(values)
    return sum(values) / len(values) if values else 0.0


def mean_of(rows: list[dict], metric: str) -> float:
    """One metric's mean over scored rows, rounded to 4 places (the evaluation's figures)."""
    return round(mean(r[metric] for r in rows), 4)
