"""Plotly figures as plain JSON-able dicts; plotly.js (served from static/) draws them in the browser.

Keeping figures as data means no multi-megabyte script per chart: each page loads plotly.min.js once
and passes its figures through ``json_script``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

_LAYOUT = {
    "margin": {"l": 55, "r": 20, "t": 40, "b": 90},
    "height": 340,
    "legend": {"orientation": "h", "y": -0.3},
    "font": {"family": "system-ui, sans-serif", "size": 12},
}
# Colour-blind-safe palette (Okabe-Ito); series are also told apart by name, marker and dash.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
DASHES = ["solid", "dash", "dot", "dashdot", "longdash", "longdashdot"]
SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross"]


def figure(title: str, data: list[dict], **layout) -> dict:
    """A figure dict with our shared layout."""
    return {"data": data, "layout": {**_LAYOUT, "title": {"text": title}, **layout}}


# Daily rollups are categories (one per day with data), so a single day is not drawn as a time span.
DAY_AXIS = {"type": "category", "title": {"text": "day"}}


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
        "marker": {"color": PALETTE[index % len(PALETTE)], "pattern": {"shape": patterns[index % len(patterns)]}},
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
