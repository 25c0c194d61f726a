"""Plotly figures as plain JSON-able dicts; plotly.js (served from static/) draws them in the browser.

Keeping figures as data means no multi-megabyte script per chart: each page loads plotly.min.js once
and passes its figures through ``json_script``. The figures of the metrics pages are built from the
daily metrics rollup (feedback.DailyMetric): charts never scan raw history.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import date

from feedback.models import DailyMetric

# The legend sits at the bottom of the figure (``yref: container``): plotly reserves its rows there, and the axes'
# ``automargin`` fits the tick labels and titles above it, so no label is drawn under the legend.
_LAYOUT = {
    "margin": {"l": 55, "r": 20, "t": 40, "b": 10},
    "height": 360,
    "legend": {"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom", "x": 0},
    "font": {"family": "system-ui, sans-serif", "size": 12},
    "showlegend": True,  # a figure with one series still names it
}
# Colour-blind-safe palette (Okabe-Ito); series are also told apart by name, marker and dash.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross"]


def figure(title: str, data: list[dict], **layout) -> dict:
    """A figure dict with our shared layout (axes always make room for their labels: ``automargin``)."""
    for axis in ("xaxis", "yaxis"):
        layout[axis] = {"automargin": True, **layout.get(axis, {})}
    return {"data": data, "layout": {**_LAYOUT, "title": {"text": title}, **layout}}


# Days on a date axis (so the policy-change marks, drawn at their time, line up with the days), ticks slanted
# with the margin they need, so a month of dates is never cut off.
DAY_AXIS = {"type": "date", "title": {"text": "day"}, "tickangle": -45, "automargin": True, "tickformat": "%b %d"}


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


HISTOGRAM_BINS = 20


def histogram_series(name: str, values: Iterable[float], index: int = 0, bins: int = HISTOGRAM_BINS) -> dict:
    """Counts of ``values`` (weights, in [0, 1]) in ``bins`` equal bins, as bars at the bins' centres: binned
    here, so the pages need only plotly.js's basic bundle (scatter and bar), which has no histogram trace."""
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, max(0, int(v * bins)))] += 1
    centres = [round((i + 0.5) / bins, 4) for i in range(bins)]
    return {
        "type": "bar",
        "name": name,
        "x": centres,
        "y": counts,
        "width": 1 / bins,
        "opacity": 0.65,
        "marker": {"color": PALETTE[index % len(PALETTE)], "pattern": {"shape": ["", "/", "x"][index % 3]}},
        "hovertemplate": "%{x:.3f} ± " + f"{0.5 / bins:.3f}" + ": %{y}<extra>%{fullData.name}</extra>",
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
        margin={"l": 55, "r": 20, "t": 90, "b": 10},
    )


# ---------------------------------------------------------------------------------------------
# Marks of policy changes on every time chart; the rank-dependent measures (feedback.analysis)


def with_marks(fig: dict, marks: list[dict], *, labels: bool = True) -> dict:
    """``fig`` with a vertical line at each mark's time (policy changes solid, decay runs dotted) and, with
    ``labels``, the policy changes named at the foot of their line. Marks are ``learning.marks_between``'s."""
    layout = fig["layout"]
    shapes, annotations = list(layout.get("shapes", [])), list(layout.get("annotations", []))
    for mark in marks:
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
        if labels and mark["kind"] == "policy":
            annotations.append(
                {
                    "x": at,
                    "xref": "x",
                    "yref": "paper",
                    "y": 1,
                    "yanchor": "bottom",
                    "xanchor": "left",
                    "text": mark["label"],
                    "hovertext": mark["text"],
                    "showarrow": False,
                    "font": {"size": 11, "color": colour},
                }
            )
    layout["shapes"], layout["annotations"] = shapes, annotations
    return fig


def _error_bars(estimates) -> dict:
    return {
        "type": "data",
        "symmetric": False,
        "array": [None if e.value is None else e.high - e.value for e in estimates],
        "arrayminus": [None if e.value is None else e.value - e.low for e in estimates],
        "thickness": 1.2,
        "width": 4,
    }


def rank_measures(periods, marks: list[dict], *, rolling: bool = False) -> dict:
    """MRR of the first used item and the share of sessions whose top item was used, per week (or over the 7
    days ending each day), each point with its 95% interval as an error bar and its n in the hover."""
    x = [(p.end if rolling else p.start).isoformat() for p in periods]
    series = []
    for index, (name, key, fmt) in enumerate(
        (("MRR of the first used item", "mrr", ".3f"), ("top item used (share of sessions)", "top", ".0%"))
    ):
        ests = [getattr(p, key) for p in periods]
        series.append(
            line_series(
                name,
                x,
                [e.value for e in ests],
                index,
                error_y=_error_bars(ests),
                text=[
                    "no session" if e.value is None else f"n = {e.n}, 95% {e.low:{fmt}}–{e.high:{fmt}}" for e in ests
                ],
                hovertemplate="%{x}: %{y:" + fmt + "} (%{text})<extra>%{fullData.name}</extra>",
            )
        )
    what = "7 days ending each day" if rolling else "per week"
    fig = figure(
        f"Where the first used item ranked, {what} (bars: 95% intervals; lines: policy changes)",
        series,
        xaxis={"type": "date", "title": {"text": "day" if rolling else "week starting"}, "tickformat": "%b %d"},
        yaxis={"range": [0, 1.05], "title": {"text": "MRR / share"}},
        margin={"l": 55, "r": 20, "t": 60, "b": 10},
    )
    return with_marks(fig, [m for m in marks if m["kind"] == "policy"])


def before_after(ba) -> dict:
    """Two series around a revision, day by day (days from the change: negative before, 0 and up after): each
    day's MRR of the first used item, with the day's n; each window's mean as a horizontal line."""
    series, shapes = [], []
    for index, (name, group, sign) in enumerate(
        ((f"before r{ba.revision}", ba.sessions_before, -1), (f"after r{ba.revision}", ba.sessions_after, 1))
    ):
        by_day: dict[int, list[float]] = {}
        for s in group:
            offset = math.floor((s.started - ba.at).total_seconds() / 86400)
            by_day.setdefault(offset, []).append(s.reciprocal_rank)
        days = sorted(by_day)
        series.append(
            line_series(
                name,
                days,
                [sum(by_day[d]) / len(by_day[d]) for d in days],
                index,
                text=[f"n = {len(by_day[d])}" for d in days],
                hovertemplate="day %{x}: MRR %{y:.3f} (%{text})<extra>%{fullData.name}</extra>",
                mode="markers+lines",
            )
        )
        period = ba.before if sign < 0 else ba.after
        if period.mrr.value is not None:
            x0, x1 = (-ba.days, 0) if sign < 0 else (0, ba.days)
            shapes.append(
                {
                    "type": "line",
                    "xref": "x",
                    "yref": "y",
                    "x0": x0,
                    "x1": x1,
                    "y0": period.mrr.value,
                    "y1": period.mrr.value,
                    "line": {"color": PALETTE[index], "width": 2, "dash": "dot"},
                }
            )
    shapes.append(
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": 0,
            "x1": 0,
            "y0": 0,
            "y1": 1,
            "line": {"color": MARK_STYLE["policy"][0], "width": 1.5},
        }
    )
    d = ba.mrr
    diff = (
        "no sessions on one side"
        if d.value is None
        else f"difference {d.value:+.3f} (95% {d.low:+.3f} to {d.high:+.3f})"
    )
    return figure(
        f"MRR of the first used item, {ba.days} days either side of r{ba.revision}: {diff}",
        series,
        xaxis={
            "title": {"text": f"days from r{ba.revision} (dotted: each window's mean)"},
            "range": [-ba.days - 0.5, ba.days + 0.5],
        },
        yaxis={"range": [0, 1.05], "title": {"text": "MRR"}},
        shapes=shapes,
    )
