"""The one scorer of the learning harnesses: a ranked list of notes against the notes that answer the question.

Used by the synthetic world (node ids), the demo's history and the over-HTTP evaluation (note keys):
hit@5 = 1 if a useful note is among the top 5; recall@5 = useful notes among the top 5 / min(5, useful);
MRR@5 = 1 / rank of the first useful note among the top 5 (0 if none); ``rr`` = 1 / rank of the first
useful note anywhere in the list (``reciprocal_rank``: the synthetic world's MRR, not cut at 5).
"""

from __future__ import annotations

import random
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


# --- baselines and how items were reached (the over-HTTP evaluation) --------------------------------------

RRF_K = 60  # the reference hybrid's reciprocal-rank constant (Cormack et al. 2009); fixed, never tuned to a set
# How an item entered the candidates without following an edge of the graph (ranking.retrieval.Candidate.entry):
# a triplet hit's path is the edge whose embedding was hit, an entry point all the same.
ENTRY_POINTS = frozenset({"start", "vector", "lexical", "triplet", "memory"})


def hybrid_keys(hits: list[dict], rrf_k: int = RRF_K) -> list[str]:
    """The plain hybrid (cosine + BM25): reciprocal-rank fusion of the hits' two raw rankings, best first.

    Each hit scores 1 / (rrf_k + its rank by ``vector_score``) + 1 / (rrf_k + its rank by ``bm25``); a hit
    with no vector (None) or no BM25 (0) has no rank on that side and gets nothing from it. Ranks and the
    final order break ties by key, so the order is the same on every call. No graph, no learned weight,
    no policy number: the reference fusion beside every table (docs/learning.md, "Baselines")."""

    def ranks(scores: dict[str, float]) -> dict[str, int]:
        return {k: r for r, k in enumerate(sorted(scores, key=lambda k: (-scores[k], k)), start=1)}

    vector, lexical = {}, {}
    for h in hits:
        if h.get("vector_score") is not None:
            vector[h["key"]] = max(vector.get(h["key"], float("-inf")), h["vector_score"])
        if (h.get("bm25") or 0) > 0:
            lexical[h["key"]] = max(lexical.get(h["key"], 0.0), h["bm25"])
    vr, lr = ranks(vector), ranks(lexical)
    fused = {
        k: (1.0 / (rrf_k + vr[k]) if k in vr else 0.0) + (1.0 / (rrf_k + lr[k]) if k in lr else 0.0)
        for k in set(vr) | set(lr)
    }
    return sorted(fused, key=lambda k: (-fused[k], k))


def edge_way(item: dict) -> str | None:
    """The edge type through which a context item came, or None for an entry point.

    An item came through an edge when its ``entry`` is not an entry point (``ENTRY_POINTS``: today that is
    ``expansion``, and any way a later change adds) and it has a ``path``; the type is its ``edge_type`` (the
    last edge of the path), "?" when the answer does not name one."""
    if item.get("entry") in ENTRY_POINTS or not item.get("path"):
        return None
    return item.get("edge_type") or "?"


# --- intervals over questions ------------------------------------------------------------------------------

RESAMPLES = 2000
BOOTSTRAP_SEED = 20_240_601


def _percentile(sorted_values: list[float], q: float) -> float:
    """The q-quantile (0..1) of sorted values, linear between neighbours (numpy's default)."""
    if not sorted_values:
        return 0.0
    pos = q * (len(sorted_values) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_mean(
    values: list[float], *, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED, level: float = 0.95
) -> dict:
    """The mean of ``values`` and its percentile bootstrap interval over them (resampled with replacement,
    ``resamples`` times, from a seeded generator: the same values give the same interval).

    {"mean", "lo", "hi", "n"}; for no values all 0 with n 0, for one value the interval is that value."""
    values = [float(v) for v in values]
    n = len(values)
    if not n:
        return {"mean": 0.0, "lo": 0.0, "hi": 0.0, "n": 0}
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(values, k=n)) / n for _ in range(resamples))
    tail = (1.0 - level) / 2
    return {
        "mean": round(sum(values) / n, 4),
        "lo": round(_percentile(means, tail), 4),
        "hi": round(_percentile(means, 1.0 - tail), 4),
        "n": n,
    }


def bootstrap_paired(a: list[float], b: list[float], **kwargs) -> dict:
    """The mean difference a - b over paired values (the same questions asked two ways) and its bootstrap
    interval: the questions are resampled, each keeping its pair (``bootstrap_mean`` of the differences)."""
    if len(a) != len(b):
        raise ValueError(f"paired values of different lengths: {len(a)} and {len(b)}")
    return bootstrap_mean([x - y for x, y in zip(a, b, strict=True)], **kwargs)
