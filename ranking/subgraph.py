"""An injection's candidate subgraph for the graph view: entry points, the paths that surfaced each candidate.

``injection_subgraph(injection)`` reads the frozen candidate log (feedback.models.InjectionCandidate,
as ``ranking.explain.explain`` does) and draws, for each candidate, the path of edges that reached
it from an entry point (a start node, a vector hit, or a triplet hit's edge). Selected candidates
come first, then those cut, in rank order, while the drawing stays within its bounds. Edge weights
and types are read now (the log keeps the path, not every edge's weight at the time); the injection
page's candidate tables stay the text alternative and hold the logged scores.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

from feedback.models import ContextInjection
from graphadmin.models import Edge, EdgeType, Node
from graphadmin.tenancy import graph_access

from .explain import candidate_dict

MAX_EDGES = 150
MAX_CANDIDATES = 150
# How an entry point entered; 'expansion' is reached along edges.
ENTRY_KINDS = ("start", "vector", "lexical", "triplet")


def injection_subgraph(injection: ContextInjection, *, max_edges: int = MAX_EDGES) -> dict:
    """Nodes, edges and candidate paths of an injection, bounded: at most ``max_edges`` edges and
    MAX_CANDIDATES candidates, the selected ones first. Four queries.

    A node's ``status`` is ``selected`` (given to the agent), ``cut`` (considered, not given) or
    ``path`` (only passed through); ``entry`` names how it entered when it is an entry point. An
    edge is ``selected`` when it lies on the path of a selected candidate.
    """
    graph_id = injection.graph_id
    cands = [candidate_dict(c) for c in injection.candidates.order_by("rank")]
    shown, edge_ids, truncated = _shown_candidates(cands, max_edges)
    edge_rows = {
        e["id"]: e
        for e in Edge.objects.filter(graph_id=graph_id, pk__in=edge_ids).values(
            "id", "source_id", "target_id", "edge_type__name", "weight", "feedback_weight", "archived"
        )
    }
    on_selected = {e for c in shown if c["selected"] for e in c["path"]}
    return {
        "kind": "injection",
        "injection": injection.pk,
        "limit": max_edges,
        "truncated": truncated,
        "candidates": len(cands),
        "nodes": _node_dicts(graph_id, shown, edge_rows),
        "edges": [_edge_dict(graph_id, e, on_selected) for e in sorted(edge_rows.values(), key=lambda e: e["id"])],
        "paths": [
            {
                "rank": c["rank"],
                "node": c["node"],
                "selected": c["selected"],
                "entry": c["entry"],
                "edges": c["path"],
                "cut": c["cut"],
            }
            for c in sorted(shown, key=lambda c: c["rank"])
        ],
        "types": list(EdgeType.objects.filter(graph_id=graph_id).order_by("name").values_list("name", flat=True)),
    }


def _shown_candidates(cands: list[dict], max_edges: int) -> tuple[list[dict], set[int], bool]:
    """The candidates drawn (selected first, then by rank, within the bounds), their paths' edge ids,
    and whether any was left out."""
    shown, edge_ids, truncated = [], set(), False
    for cand in sorted(cands, key=lambda c: (not c["selected"], c["rank"])):
        path = set(cand["path"])
        if len(shown) >= MAX_CANDIDATES or len(edge_ids | path) > max_edges:
            truncated = True
            continue
        shown.append(cand)
        edge_ids |= path
    return shown, edge_ids, truncated


def _node_dicts(graph_id: int, shown: list[dict], edge_rows: dict[int, dict]) -> list[dict]:
    """The drawn nodes (candidates and the ends of their paths' edges), best rank first, with status and entry."""
    node_ids = {c["node"] for c in shown} | {n for e in edge_rows.values() for n in (e["source_id"], e["target_id"])}
    titles = {n["id"]: n for n in Node.objects.filter(graph_id=graph_id, pk__in=node_ids).values("id", "title", "kind")}
    best: dict[int, dict] = {}  # node id -> its best-ranked shown candidate (a selected one first)
    for cand in shown:
        best.setdefault(cand["node"], cand)
    entries = {c["node"]: c["entry"] for c in reversed(shown) if c["entry"] in ENTRY_KINDS}
    # A triplet hit brings both ends of its edge: the far end is an entry point too.
    for cand in shown:
        if cand["entry"] == "triplet" and cand["path"] and cand["path"][0] in edge_rows:
            first = edge_rows[cand["path"][0]]
            for end in (first["source_id"], first["target_id"]):
                entries.setdefault(end, "triplet")
    nodes = []
    for node_id in sorted(node_ids, key=lambda n: (best[n]["rank"] if n in best else 10**9, n)):
        cand = best.get(node_id)
        row = titles.get(node_id, {"title": str(node_id), "kind": ""})
        nodes.append(
            {
                "id": node_id,
                "title": row["title"],
                "kind": row["kind"],
                "rank": cand["rank"] if cand else None,
                "status": ("selected" if cand["selected"] else "cut") if cand else "path",
                "entry": entries.get(node_id, ""),
                "url": reverse("node", args=[graph_id, node_id]),
            }
        )
    return nodes


def _edge_dict(graph_id: int, e: dict, on_selected: set[int]) -> dict:
    """One drawn edge; ``selected`` when it lies on a selected candidate's path."""
    return {
        "id": e["id"],
        "source": e["source_id"],
        "target": e["target_id"],
        "type": e["edge_type__name"],
        "weight": e["weight"],
        "feedback_weight": e["feedback_weight"],
        "archived": e["archived"],
        "selected": e["id"] in on_selected,
        "url": reverse("edge", args=[graph_id, e["id"]]),
    }


@login_required
def injection_subgraph_json(request, graph_id, injection_id):
    """GET /g/<graph>/injections/<injection>/graph.json: the injection page's graph view, as JSON."""
    access = graph_access(request.user, graph_id)
    injection = get_object_or_404(
        ContextInjection.objects.filter(graph=access.graph).only("pk", "graph_id"), pk=injection_id
    )
    return JsonResponse(injection_subgraph(injection))
