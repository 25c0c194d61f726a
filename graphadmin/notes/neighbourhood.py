"""A node's neighbourhood for the graph view: the strongest edges within one or two hops, in four queries.

``neighbourhood(graph_id, node_id)`` reads the live (not archived) edges touching the node, strongest
first, then the strongest edges touching those neighbours, up to a bound, and the nodes at their ends.
The node page draws it (static/js/graphview.js) from ``neighbourhood_json``; the page's tables stay
its text alternative.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.db.models import Q
from django.http import JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

from graphadmin.errors import InputError
from graphadmin.models import Edge, EdgeType, Node
from graphadmin.params import parse_int
from graphadmin.tenancy import graph_access

MAX_EDGES = 150  # the most one canvas is asked to hold
DEFAULT_EDGES = 40  # what a reader can take in at a glance: the page's default, more on request
FIRST_HOP_SHARE = 2 / 3  # at most this share of the bound goes to the first hop, so a hub still shows its second
_EDGE_FIELDS = ("id", "source_id", "target_id", "edge_type__name", "weight", "feedback_weight")


def _edge(row: dict, graph_id: int, hops: int) -> dict:
    return {
        "id": row["id"],
        "source": row["source_id"],
        "target": row["target_id"],
        "type": row["edge_type__name"],
        "weight": row["weight"],
        "feedback_weight": row["feedback_weight"],
        "hops": hops,
        "url": reverse("edge", args=[graph_id, row["id"]]),
    }


def _strongest(edges, limit: int) -> tuple[list[dict], bool]:
    """The ``limit`` strongest edges of a queryset (weight, then id), and whether there were more."""
    rows = list(edges.order_by("-weight", "id").values(*_EDGE_FIELDS)[: limit + 1])
    return rows[:limit], len(rows) > limit


def neighbourhood(graph_id: int, node_id: int, *, hops: int = 2, limit: int = MAX_EDGES, edge_type: str = "") -> dict:
    """Nodes and edges within ``hops`` (1 or 2) of the node: at most ``limit`` edges, strongest first; with
    ``edge_type`` (a type's name), the edges of that type only.

    The first hop takes up to two thirds of the bound when a second hop is asked for; the second
    hop fills the rest with the strongest edges touching a first-hop neighbour. ``truncated`` says
    whether edges were left out. Archived edges are left out; archived nodes are drawn, marked.
    """
    live = Edge.objects.filter(graph_id=graph_id, archived=False)
    if edge_type:
        live = live.filter(edge_type__name=edge_type)
    first_limit = limit if hops == 1 else max(1, int(limit * FIRST_HOP_SHARE))
    first, truncated = _strongest(live.filter(Q(source_id=node_id) | Q(target_id=node_id)), first_limit)
    hop_of = {node_id: 0}
    for row in first:
        for end in (row["source_id"], row["target_id"]):
            hop_of.setdefault(end, 1)
    edges = [_edge(row, graph_id, 1) for row in first]
    neighbours = [n for n, h in hop_of.items() if h == 1]
    if hops == 2 and neighbours and len(edges) < limit:
        # Edges touching the node itself are first-hop edges (left out above when over the bound).
        second, more = _strongest(
            live.filter(Q(source_id__in=neighbours) | Q(target_id__in=neighbours))
            .exclude(source_id=node_id)
            .exclude(target_id=node_id),
            limit - len(edges),
        )
        truncated = truncated or more
        for row in second:
            for end in (row["source_id"], row["target_id"]):
                hop_of.setdefault(end, 2)
        edges.extend(_edge(row, graph_id, 2) for row in second)
    rows = {
        n["id"]: n
        for n in Node.objects.filter(graph_id=graph_id, pk__in=hop_of).values(
            "id", "title", "kind", "feedback_weight", "archived"
        )
    }
    nodes = [
        {
            **rows[n],
            "hops": hop,
            "status": ("center", "hop1", "hop2")[hop],
            "url": reverse("node", args=[graph_id, n]),
        }
        for n, hop in hop_of.items()
        if n in rows
    ]
    return {
        "kind": "neighbourhood",
        "center": node_id,
        "hops": hops,
        "limit": limit,
        "edge_type": edge_type,
        "truncated": truncated,
        "nodes": nodes,
        "edges": edges,
        "types": list(EdgeType.objects.filter(graph_id=graph_id).order_by("name").values_list("name", flat=True)),
    }


def _bounded_int(request, name: str, default: int, low: int, high: int) -> int:
    raw = request.GET.get(name, "")
    return default if raw == "" else parse_int(raw, name, low=low, high=high)


@login_required
def neighbourhood_json(request, graph_id, node_id):
    """GET /g/<graph>/nodes/<node>/graph.json[?hops=1|2&limit=1..150&type=<edge type>]: the node page's graph
    view, as JSON (40 edges unless asked; an unknown edge type is a 400 naming ``type``)."""
    access = graph_access(request.user, graph_id)
    node = get_object_or_404(Node.objects.filter(graph=access.graph).only("pk"), pk=node_id)
    try:
        hops = _bounded_int(request, "hops", 2, 1, 2)
        limit = _bounded_int(request, "limit", DEFAULT_EDGES, 1, MAX_EDGES)
        edge_type = edge_type_param(access.graph.pk, request.GET.get("type", ""))
    except InputError as exc:
        return JsonResponse(exc.errors, status=400)
    return JsonResponse(neighbourhood(access.graph.pk, node.pk, hops=hops, limit=limit, edge_type=edge_type))


def edge_type_param(graph_id: int, raw: str) -> str:
    """``raw`` when it names one of the graph's edge types ('' for all); otherwise an InputError on ``type``."""
    raw = raw.strip()
    if raw and not EdgeType.objects.filter(graph_id=graph_id, name=raw).exists():
        raise InputError({"type": [f"no edge type named {raw[:80]!r} in this graph"]})
    return raw
