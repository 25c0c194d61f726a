"""Node and edge pages: text and source, neighbours with types and weights, weight history charts."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from feedback import queries
from graphadmin.models import Edge, Node

from . import charts
from .access import graph_access

HISTORY_LIMIT = 500


def _history_figure(title: str, changes) -> dict:
    """One line per weight field; each point annotated with its batch and event."""
    series = []
    for index, field in enumerate(("weight", "feedback_weight")):
        rows = [c for c in changes if c.field == field]
        if not rows:
            continue
        series.append(
            charts.line_series(
                field,
                [c.created_at.isoformat() for c in rows],
                [c.after for c in rows],
                index,
                text=[
                    f"batch {c.batch_id} ({c.batch.kind}): {c.event or c.batch.kind}, {c.before:.3f} → {c.after:.3f}"
                    for c in rows
                ],
                hovertemplate="%{text}<extra>%{fullData.name}</extra>",
            )
        )
    return charts.figure(title, series, yaxis={"range": [0, 1], "title": {"text": "value"}})


def _record_page(request, access, kind: str, record, title: str, **context):
    """A node or edge page: the record, its latest 20 changes and its history chart (last 500 changes)."""
    latest = list(queries.history_of(access.graph, kind, record.pk, latest=HISTORY_LIMIT))  # newest first
    return render(
        request,
        f"dashboard/{kind}.html",
        {
            "access": access,
            kind: record,
            "changes": latest[:20],
            "history": _history_figure(title, latest[::-1]) if latest else None,
            **context,
        },
    )


@login_required
def node_detail(request, graph_id, node_id):
    access = graph_access(request, graph_id)
    node = get_object_or_404(Node.objects.filter(graph=access.graph), pk=node_id)
    outgoing = (
        Edge.objects.filter(graph=access.graph, source=node)
        .select_related("target", "edge_type")
        .order_by("-weight")[:100]
    )
    incoming = (
        Edge.objects.filter(graph=access.graph, target=node)
        .select_related("source", "edge_type")
        .order_by("-weight")[:100]
    )
    return _record_page(request, access, "node", node, f"History of {node.title}", outgoing=outgoing, incoming=incoming)


@login_required
def edge_detail(request, graph_id, edge_id):
    access = graph_access(request, graph_id)
    edge = get_object_or_404(
        Edge.objects.filter(graph=access.graph).select_related("source", "target", "edge_type"), pk=edge_id
    )
    return _record_page(request, access, "edge", edge, "Weight history")
