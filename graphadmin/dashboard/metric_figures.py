"""Figures built from the daily metrics rollup (feedback.DailyMetric): charts never scan raw history."""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from feedback.models import DailyMetric

from . import charts


def rollup_rows(graph, since: date, until: date) -> list[DailyMetric]:
    """The graph's DailyMetric rows between two dates (inclusive), oldest first."""
    return list(DailyMetric.objects.filter(graph=graph, day__gte=since, day__lte=until).order_by("day"))


def score_distribution(rows) -> dict:
    """Traversal-score percentiles and spread per day: a widening band is spreading, a narrowing one clustering."""
    days = [r.day.isoformat() for r in rows if r.data.get("scores", {}).get("count")]
    scores = [r.data["scores"] for r in rows if r.data.get("scores", {}).get("count")]
    series = [
        charts.line_series(label, days, [s[key] for s in scores], i)
        for i, (label, key) in enumerate(
            (("p90", "p90"), ("median", "p50"), ("p10", "p10"), ("spread (std dev)", "stddev"))
        )
    ]
    return charts.figure(
        "Traversal-score distribution per day", series, xaxis=charts.DAY_AXIS, yaxis={"title": {"text": "score"}}
    )


def updates_by_kind(rows) -> dict:
    """Weight changes per day, stacked by batch kind."""
    per_kind: dict[str, dict[str, int]] = defaultdict(dict)
    days = [r.day.isoformat() for r in rows]
    for r in rows:
        for u in r.data.get("updates", []):
            per_kind[u["kind"]][r.day.isoformat()] = per_kind[u["kind"]].get(r.day.isoformat(), 0) + u["count"]
    series = [
        charts.bar_series(kind, days, [counts.get(d, 0) for d in days], i)
        for i, (kind, counts) in enumerate(sorted(per_kind.items()))
    ]
    return charts.figure(
        "Weight updates per day by kind",
        series,
        barmode="stack",
        xaxis=charts.DAY_AXIS,
        yaxis={"title": {"text": "changes"}},
    )


def top_used_fraction(rows) -> dict:
    """Share of sessions whose top-ranked candidates were used."""
    points = [
        (r.day.isoformat(), r.data["top_used"]["fraction"])
        for r in rows
        if r.data.get("top_used", {}).get("fraction") is not None
    ]
    k = rows[-1].data.get("top_used", {}).get("top_k", 3) if rows else 3
    series = [
        charts.line_series(f"sessions using a top-{k} candidate", [d for d, _ in points], [f for _, f in points], 0)
    ]
    return charts.figure(
        "Sessions whose top-ranked candidates were used",
        series,
        xaxis=charts.DAY_AXIS,
        yaxis={"range": [0, 1], "tickformat": ".0%"},
    )


def weight_distribution(rows) -> dict:
    """Weight histogram per edge type from the latest rollup (ten bins over [0, 1])."""
    latest = next((r for r in reversed(rows) if r.data.get("weights")), None)
    bins = [f"{i / 10:.1f}–{(i + 1) / 10:.1f}" for i in range(10)]
    series = []
    if latest:
        for i, w in enumerate(latest.data["weights"]):
            series.append(charts.bar_series(w["edge_type"], bins, w["weight"]["histogram"], i))
    title = (
        f"Edge weight distribution by type ({latest.day.isoformat()})" if latest else "Edge weight distribution by type"
    )
    return charts.figure(
        title, series, barmode="group", xaxis={"title": {"text": "weight"}}, yaxis={"title": {"text": "edges"}}
    )


def mean_weights_by_type(rows) -> dict:
    """Mean weight (solid) and feedback_weight (dashed) per edge type over time."""
    by_type: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for r in rows:
        for w in r.data.get("weights", []):
            by_type[w["edge_type"]].append((r.day.isoformat(), w["weight"]["mean"], w["feedback_weight"]["mean"]))
    series = []
    for i, (name, points) in enumerate(sorted(by_type.items())):
        days = [p[0] for p in points]
        series.append(
            charts.line_series(
                f"{name} weight",
                days,
                [p[1] for p in points],
                i,
                line={"color": charts.PALETTE[i % 8], "dash": "solid"},
            )
        )
        series.append(
            charts.line_series(
                f"{name} feedback_weight",
                days,
                [p[2] for p in points],
                i,
                line={"color": charts.PALETTE[i % 8], "dash": "dash"},
            )
        )
    return charts.figure(
        "Mean weight and feedback_weight by edge type", series, xaxis=charts.DAY_AXIS, yaxis={"range": [0, 1]}
    )


def outcomes_per_day(rows) -> dict:
    days = [r.day.isoformat() for r in rows]
    series = [
        charts.bar_series(outcome, days, [r.data.get("outcomes", {}).get(outcome, 0) for r in rows], i)
        for i, outcome in enumerate(("accepted", "rework", "rejected"))
    ]
    return charts.figure("Session outcomes per day", series, barmode="stack", xaxis=charts.DAY_AXIS)


def csv_rows(rows):
    """Flat rows for the CSV export: one line per day, edge type and measure."""
    yield ["day", "section", "key", "measure", "value"]
    for r in rows:
        d = r.day.isoformat()
        s = r.data.get("scores", {})
        for key in ("count", "mean", "stddev", "p10", "p50", "p90"):
            yield [d, "scores", "", key, s.get(key)]
        for u in r.data.get("updates", []):
            yield [d, "updates", f"{u['kind']}/{u['edge_type']}/{u['field']}", "count", u["count"]]
        for w in r.data.get("weights", []):
            for fld in ("weight", "feedback_weight"):
                yield [d, "weights", w["edge_type"], f"{fld}_mean", w[fld]["mean"]]
        t = r.data.get("top_used", {})
        yield [d, "top_used", "", "fraction", t.get("fraction")]
        for outcome, n in r.data.get("outcomes", {}).items():
            yield [d, "outcomes", outcome, "sessions", n]
