"""Plotly figures as plain JSON-able dicts; plotly.js (served from static/) draws them in the browser.

Keeping figures as data means no multi-megabyte script per chart: each page loads plotly.min.js once
and passes its figures through ``json_script``. The figures of the metrics pages are built from the
daily metrics rollup (feedback.DailyMetric): charts never scan raw history.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date

from feedback.models import DailyMetric

_LAYOUT = {
    "margin": {"l": 55, "r": 20, "t": 40, "b": 90},
    "height": 340,
    "legend": {"orientation": "h", "y": -0.3},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "showlegend": True,  # a figure with one series still names it
}
# Colour-blind-safe palette (Okabe-Ito); series are also told apart by name, marker and dash.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross"]


def figure(title: str, data: list[dict], **layout) -> dict:
    """A figure dict with our shared layout."""
    return {"data": data, "layout": {**_LAYOUT, "title": {"text": title}, **layout}}


# Daily rollups are categories (one per day with data), so a single day is not drawn as a time span.
# Ticks slanted, with the margin they need, so a month of dates is never cut off.
DAY_AXIS = {"type": "category", "title": {"text": "day"}, "tickangle": -45, "automargin": True}


def line_series(name: str, x: Sequence, y: Sequence, index: int = 0, **extra) -> dict:
    """A line with markers, distinguishable without colour (dash and marker vary with ``index``)."""
    return {
        "type": "scatter",
        "mode": "lines+markers",
        "name": name,
        "x": list(x),
        "y": list(y),
        "line": {"color": PALETTE[index % len(PALETTE)], "dash": DASHES[index % len(DASHES)]},
        "marker": {"symbol": SYMBOLS[index % len(SYMBOLS)]},
        **extra,
    }


def bar_series(name: str, x: Sequence, y: Sequence, index: int = 0, **extra) -> dict:
    """A bar series with a pattern as well as a colour, so stacks read in greyscale."""
    patterns = ["", "/", "\\", "x", "-", "|", "+", "."]
    return {
        "type": "bar",
        "name": name,
        "x": list(x),
        "y": list(y),
        # Past the palette's eight colours the pattern shifts, so the ninth series is not the first's twin.
        "marker": {
            "color": PALETTE[index % len(PALETTE)],
            "pattern": {"shape": patterns[(index + index // len(PALETTE)) % len(patterns)]},
        },
        **extra,
    }


def histogram_series(name: str, values: Iterable[float], index: int = 0) -> dict:
    return {
        "type": "histogram",
        "name": name,
        "x": list(values),
        "opacity": 0.65,
        "marker": {"color": PALETTE[index % len(PALETTE)], "pattern": {"shape": ["", "/", "x"][index % 3]}},
    }


# ---------------------------------------------------------------------------------------------
# Figures of the daily metrics rollup


def rollup_rows(graph, since: date, until: date) -> list[DailyMetric]:
    """The graph's DailyMetric rows between two dates (inclusive), oldest first."""
    return list(DailyMetric.objects.filter(graph=graph, day__gte=since, day__lte=until).order_by("day"))


def score_distribution(rows) -> dict:
    """Traversal-score percentiles and spread per day: a widening band is spreading, a narrowing one clustering."""
    days = [r.day.isoformat() for r in rows if r.data.get("scores", {}).get("count")]
    scores = [r.data["scores"] for r in rows if r.data.get("scores", {}).get("count")]
    measures = (("p90", "p90"), ("median", "p50"), ("p10", "p10"), ("mean", "mean"), ("spread (std dev)", "stddev"))
    # Percentiles of several agents together cannot be read back from each agent's (metrics.for_agents):
    # the mean is drawn instead. Otherwise the percentiles and the spread, as before.
    percentiles = any(s.get("p50") is not None for s in scores) or not scores
    wanted = ("p90", "p50", "p10", "stddev") if percentiles else ("mean", "stddev")
    series = [
        line_series(label, days, [s.get(key) for s in scores], i)
        for i, (label, key) in enumerate(m for m in measures if m[1] in wanted)
    ]
    return figure("Traversal-score distribution per day", series, xaxis=DAY_AXIS, yaxis={"title": {"text": "score"}})


def updates_by_kind(rows) -> dict:
    """Weight changes per day, stacked by batch kind."""
    per_kind: dict[str, dict[str, int]] = defaultdict(dict)
    days = [r.day.isoformat() for r in rows]
    for r in rows:
        for u in r.data.get("updates", []):
            per_kind[u["kind"]][r.day.isoformat()] = per_kind[u["kind"]].get(r.day.isoformat(), 0) + u["count"]
    series = [
        bar_series(kind, days, [counts.get(d, 0) for d in days], i)
        for i, (kind, counts) in enumerate(sorted(per_kind.items()))
    ]
    return figure(
        "Weight updates per day by kind",
        series,
        barmode="stack",
        xaxis=DAY_AXIS,
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
    series = [line_series(f"sessions using a top-{k} candidate", [d for d, _ in points], [f for _, f in points], 0)]
    return figure(
        "Sessions whose top-ranked candidates were used",
        series,
        xaxis=DAY_AXIS,
        yaxis={"range": [0, 1], "tickformat": ".0%", "title": {"text": "share of sessions"}},
    )


def weight_distribution(rows) -> dict:
    """Weight histogram per edge type from the latest rollup (ten bins over [0, 1])."""
    latest = next((r for r in reversed(rows) if r.data.get("weights")), None)
    bins = [f"{i / 10:.1f}–{(i + 1) / 10:.1f}" for i in range(10)]
    series = []
    if latest:
        for i, w in enumerate(latest.data["weights"]):
            series.append(bar_series(w["edge_type"], bins, w["weight"]["histogram"], i))
    title = (
        f"Edge weight distribution by type ({latest.day.isoformat()})" if latest else "Edge weight distribution by type"
    )
    return figure(
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
            line_series(
                f"{name} weight",
                days,
                [p[1] for p in points],
                i,
                line={"color": PALETTE[i % 8], "dash": "solid"},
            )
        )
        series.append(
            line_series(
                f"{name} feedback_weight",
                days,
                [p[2] for p in points],
                i,
                line={"color": PALETTE[i % 8], "dash": "dash"},
            )
        )
    return figure(
        "Mean weight and feedback_weight by edge type",
        series,
        xaxis=DAY_AXIS,
        yaxis={"range": [0, 1], "title": {"text": "mean weight"}},
    )


def outcomes_per_day(rows) -> dict:
    days = [r.day.isoformat() for r in rows]
    series = [
        bar_series(outcome, days, [r.data.get("outcomes", {}).get(outcome, 0) for r in rows], i)
        for i, outcome in enumerate(("accepted", "rework", "rejected"))
    ]
    return figure(
        "Session outcomes per day", series, barmode="stack", xaxis=DAY_AXIS, yaxis={"title": {"text": "sessions"}}
    )


# OWASP's CSV-injection rule: a cell a spreadsheet would read as a formula starts with one of these.
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A text cell made inert for spreadsheets: a leading formula character is quoted with an apostrophe
    (OWASP's rule; defusedcsv leaves tab and CR prefixes alone). Numbers pass as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_PREFIXES):
        return "'" + value
    return value


def csv_export(rows, learning=None, effects=None, agents=None):
    """The CSV export's rows (``csv_rows``), every text cell escaped against formula injection."""
    for row in csv_rows(rows, learning, effects, agents):
        yield [csv_cell(v) for v in row]


# The two "top-ranked used" figures count different sessions; the export says which is which.
TOP_USED_DAILY = "daily: sessions with an injection that day, using one of their top-{k} selected items"
TOP_USED_WEEKLY = "weekly: sessions whose first injection fell in the week, using one of their top-{k} selected items"


def csv_rows(rows, learning=None, effects=None, agents=None):
    """Flat rows for the CSV export: one line per day, edge type and measure; then, when given, the
    weekly learning figures (``feedback.learning``) and each policy revision's effect with its 95%
    interval (``feedback.revisions``); first, what the export covers (the agent filter) and how the
    two top-used shares differ."""
    yield ["day", "section", "key", "measure", "value"]
    k = rows[-1].data.get("top_used", {}).get("top_k", 3) if rows else 3
    yield ["", "about", "agents", "filter", ", ".join(agents.names) if agents and agents.active else "all sessions"]
    yield ["", "about", "top_used", "definition", TOP_USED_DAILY.format(k=k)]
    yield ["", "about", "weekly_learning", "definition", TOP_USED_WEEKLY.format(k=k)]
    yield ["", "about", "weights,updates", "scope", "graph-wide: every agent reads and moves the same weights"]
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
        yield [d, "top_used", "", "sessions", t.get("sessions")]
        for outcome, n in r.data.get("outcomes", {}).items():
            yield [d, "outcomes", outcome, "sessions", n]
    for w in learning.weeks if learning is not None else ():
        d = w.start.isoformat()
        for measure, value in (
            ("sessions", w.sessions),
            ("used", w.used),
            ("share", w.share),
            ("outcomes", w.outcomes),
            ("mean_score", w.mean_score),
        ):
            yield [d, "weekly_learning", "", measure, value]
    for e in effects or ():
        key = f"r{e['revision'].revision}"
        d = e["after"]["first"].isoformat() if e["after"]["days"] else ""
        before = e["before"] or {}
        low, high = e["interval"] or (None, None)
        for measure, value in (
            ("sessions_before", before.get("sessions")),
            ("share_before", before.get("fraction")),
            ("sessions_after", e["after"]["sessions"]),
            ("share_after", e["after"]["fraction"]),
            ("change", e["change"]),
            ("change_95_low", low),
            ("change_95_high", high),
        ):
            yield [d, "revision_effect", key, measure, value]


# ---------------------------------------------------------------------------------------------
# Learning at a glance (from the ledgers, feedback.learning)

MARK_STYLE = {"policy": ("#D55E00", "solid"), "decay": ("#555555", "dot")}


def learning_at_a_glance(learning) -> dict:
    """Per week, the share of sessions whose top-ranked items were used and the mean outcome score (both
    0..1, one axis), with a vertical line at each policy change (solid) and each decay run (dotted),
    labelled at the top."""
    x = [w.start.isoformat() for w in learning.weeks]
    weeks = learning.weeks
    series = [
        line_series(
            f"sessions using a top-{learning.top_k} item",
            x,
            [w.share for w in weeks],
            0,
            text=[f"{w.used} of {w.sessions} session(s)" for w in weeks],
            hovertemplate="week of %{x}: %{y:.0%} (%{text})<extra></extra>",
        ),
        line_series(
            "mean outcome score",
            x,
            [w.mean_score for w in weeks],
            1,
            text=[f"{w.outcomes} outcome(s)" for w in weeks],
            hovertemplate="week of %{x}: %{y:.2f} (%{text})<extra></extra>",
        ),
    ]
    shapes, annotations = [], []
    for mark in learning.marks:
        colour, dash = MARK_STYLE[mark["kind"]]
        at = mark["at"].isoformat()
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": at,
                "x1": at,
                "y0": 0,
                "y1": 1,
                "line": {"color": colour, "dash": dash, "width": 1.5},
                "name": mark["text"],
            }
        )
        # Decay labels above the plot, policy labels inside it at the foot of their line: they never overlap.
        place = (
            {"y": 1, "yanchor": "bottom", "textangle": -60}
            if mark["kind"] == "decay"
            else {"y": 0.02, "yanchor": "bottom", "xanchor": "left", "bgcolor": "rgba(255,255,255,0.85)"}
        )
        annotations.append(
            {
                "x": at,
                "xref": "x",
                "yref": "paper",
                "text": mark["label"],
                "hovertext": mark["text"],
                "showarrow": False,
                "font": {"size": 11 if mark["kind"] == "policy" else 10, "color": colour},
                **place,
            }
        )
    return figure(
        "Learning per week (solid lines: policy changes; dotted: decay runs)",
        series,
        xaxis={"type": "date", "title": {"text": "week starting"}, "tickformat": "%b %d"},
        yaxis={"range": [0, 1.05], "title": {"text": "share / score"}},
        shapes=shapes,
        annotations=annotations,
        margin={"l": 55, "r": 20, "t": 90, "b": 90},
    )
