"""Learning health: is what the graph learns reaching the ranking? Built from the candidate log and the weight
history, for the dashboard page, the API and ``manage.py graph_health`` alike (one answer, three media).

For the graph's last ``n`` injections:

- each score component's share of candidates whose place in their injection's order it decides (taken out of
  the total, the candidate moves), and of selected items it keeps selected (taken out, the item falls below the
  number selected; an item budget's view of the selection);
- how candidates and selected items entered (vector, lexical, triplet, start, expansion, memory), and the share
  reached by following links from an entry point (expansion: more than 0 hops), by the last link's type;

and from the weight history: the share of live weights moved in the last 7 and 30 days, by weight and by the kind
of batch that moved them; the edge types whose weights never left their default. Each inert component gets a
flag in plain words. Reads only (``feedback.queries.reads``: HEALTH_*).
"""

from __future__ import annotations

from datetime import datetime, timedelta

from graphadmin import clock
from graphadmin.models import Graph
from graphadmin.models.graph import WEIGHT_DEFAULT

from .queries import reads

DEFAULT_INJECTIONS = 200
MAX_INJECTIONS = 2000
SHORT_DAYS, LONG_DAYS = 7, 30

# The node score's components in the order they are summed (ranking.scoring.NODE_COMPONENTS), in plain words.
COMPONENTS = {
    "vector": "similarity to the question",
    "lexical": "shared words with the question",
    "hop": "closeness in the graph",
    "persona": "the caller's persona",
    "recency": "recent activity",
    "feedback": "learned feedback (outcomes)",
    "path": "learned weight of the link that reached it",
    "priority": "edge type priority",
    "memory": "what similar questions used",
    "exploration": "exploration bonus",
    "graph": "relevance carried along a link",
}
LEARNED = ("feedback", "path", "memory", "priority")  # the components learning or operators move
WEIGHTS = {
    ("node", "feedback_weight"): "note feedback weights",
    ("edge", "weight"): "link weights",
    ("edge", "feedback_weight"): "link feedback weights",
}


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def graph_health(graph: Graph, *, n: int = DEFAULT_INJECTIONS, now: datetime | None = None) -> dict:
    """The learning-health answer of ``graph`` over its last ``n`` injections (see the module)."""
    now = now or clock.now()
    rows = reads.health_rows(graph.pk, n, now - timedelta(days=SHORT_DAYS), now - timedelta(days=LONG_DAYS))
    reach_rows = rows["reach"]  # (entry, edge type or None, candidates, selected, injections, since, until)
    injections = reach_rows[0][4] if reach_rows else 0
    since, until = (reach_rows[0][5], reach_rows[0][6]) if reach_rows else (None, None)
    total_candidates = sum(r[2] for r in reach_rows)
    total_selected = sum(r[3] for r in reach_rows)

    logged = {r[0]: r for r in rows["components"]}
    components = []
    names = {**COMPONENTS, **{name: name for name in logged if name not in COMPONENTS}}  # a new one shows too
    for name, words in names.items():
        _c, candidates, nonzero, moved, selected, selected_moved = logged.get(name, (name, 0, 0, 0, 0, 0))
        components.append(
            {
                "component": name,
                "label": words,
                "candidates": candidates,
                "contributed": _share(nonzero, candidates),
                "changed_order": _share(moved, candidates),
                "selected": selected,
                "changed_selection": _share(selected_moved, selected),
                "inert": bool(candidates) and moved == 0,
            }
        )

    by_type: dict[str, list[int]] = {}
    by_entry: dict[str, list[int]] = {}
    for entry, edge_type, candidates, selected, *_ in reach_rows:
        by_entry.setdefault(entry or "unknown", [0, 0])
        by_entry[entry or "unknown"][0] += candidates
        by_entry[entry or "unknown"][1] += selected
        if edge_type:
            by_type.setdefault(edge_type, [0, 0])
            by_type[edge_type][0] += candidates
            by_type[edge_type][1] += selected
    reach = {
        "candidates": total_candidates,
        "selected": total_selected,
        "through_edge": _share(sum(v[0] for v in by_type.values()), total_candidates),
        "selected_through_edge": _share(sum(v[1] for v in by_type.values()), total_selected),
        "by_entry": [
            {
                "entry": entry,
                "candidates": c,
                "selected": sel,
                "share_of_candidates": _share(c, total_candidates),
                "share_of_selected": _share(sel, total_selected),
            }
            for entry, (c, sel) in sorted(by_entry.items())
        ],
        "by_edge_type": [
            {
                "edge_type": edge_type,
                "candidates": c,
                "selected": sel,
                "share_of_candidates": _share(c, total_candidates),
                "share_of_selected": _share(sel, total_selected),
            }
            for edge_type, (c, sel) in sorted(by_type.items())
        ],
    }

    nodes, edges = rows["live"][0]
    live = {"node": nodes, "edge": edges}
    moved_by_weight: dict[tuple, dict] = {key: {"short": 0, "long": 0, "by_kind": {}} for key in WEIGHTS}
    for target, field, kind, short, long in rows["moved"]:
        entry = moved_by_weight.setdefault((target, field), {"short": 0, "long": 0, "by_kind": {}})
        # A weight moved by two kinds of batch counts once per kind; the totals take the larger (a lower bound).
        entry["short"], entry["long"] = max(entry["short"], short), max(entry["long"], long)
        entry["by_kind"][kind] = {"short": short, "long": long}
    moved = [
        {
            "target": target,
            "field": field,
            "label": WEIGHTS.get((target, field), f"{target} {field}"),
            "live": live[target],
            f"share_{SHORT_DAYS}d": _share(m["short"], live[target]),
            f"share_{LONG_DAYS}d": _share(m["long"], live[target]),
            "by_kind": [
                {
                    "kind": kind,
                    f"share_{SHORT_DAYS}d": _share(v["short"], live[target]),
                    f"share_{LONG_DAYS}d": _share(v["long"], live[target]),
                }
                for kind, v in sorted(m["by_kind"].items())
            ],
        }
        for (target, field), m in moved_by_weight.items()
    ]

    edge_types = [
        {
            "edge_type": name,
            "edges": count,
            "mean_weight": mean_w,
            "mean_feedback_weight": mean_f,
            "weight_at_default": _share(w_default, count),
            "feedback_weight_at_default": _share(f_default, count),
            "never_left_default": bool(count) and w_default == count and f_default == count,
            "feedback_never_left_default": bool(count) and f_default == count,
        }
        for name, count, w_default, f_default, mean_w, mean_f in rows["edge_types"]
    ]

    return {
        "graph": graph.pk,
        "injections": injections,
        "window": {"n": n, "since": since, "until": until},
        "components": components,
        "reach": reach,
        "weights_moved": moved,
        "edge_types": edge_types,
        "flags": _flags(components, reach, moved, edge_types, injections, since),
    }


def _flags(components, reach, moved, edge_types, injections, since) -> list[str]:
    """Plain-words warnings: every inert component, no path through the graph, weights that never move."""
    if not injections:
        return ["No retrieval is logged yet: nothing to judge learning by."]
    window = f"the last {injections} retrievals" + (f" (since {since:%Y-%m-%d})" if since else "")
    flags = []
    for c in components:
        if not c["candidates"]:
            continue
        if c["inert"]:
            flags.append(f"{c['label'].capitalize()} ({c['component']}) has changed no ranking in {window}.")
        elif c["component"] in LEARNED and not (c["changed_selection"] or 0):
            flags.append(
                f"{c['label'].capitalize()} ({c['component']}) reorders some candidates but decided no selected "
                f"item in {window}."
            )
    if reach["selected"] and not reach["selected_through_edge"]:
        flags.append(f"No selected item was reached through a link in {window}: the graph's edges brought nothing.")
    for m in moved:
        if m["live"] and not m[f"share_{LONG_DAYS}d"]:
            flags.append(f"No {m['label']} moved in the last {LONG_DAYS} days.")
    for t in edge_types:
        if t["never_left_default"]:
            flags.append(
                f"The {t['edge_type']} links' weights never left their default ({WEIGHT_DEFAULT}): "
                f"{t['edges']} link(s)."
            )
        elif t["feedback_never_left_default"]:
            flags.append(
                f"The {t['edge_type']} links' feedback weights never left their default ({WEIGHT_DEFAULT}): "
                f"{t['edges']} link(s); outcomes never reached them."
            )
    return flags
