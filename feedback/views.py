"""Pages of feedback: a graph's overview, update batches (list, detail, rollback), feedback impact, and
the node and edge records with their weight history."""

from __future__ import annotations

import csv
from datetime import date

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from feedback import actions, charts, metrics, queries
from feedback.models import BATCH_KINDS, BATCH_STATUSES, AgentSession, ContextInjection, UpdateBatch, WeightHistory
from graphadmin import audit
from graphadmin.models import Edge, Node
from graphadmin.note_links import render_node_text
from graphadmin.tenancy import graph_access

HISTORY_LIMIT = 500


@login_required
def overview(request, graph_id):
    """Overview of one graph: counts, latest batches, metric charts, the audit-chain badge."""
    access = graph_access(request.user, graph_id)
    graph = access.graph
    rows = charts.rollup_rows(graph, *metrics.day_range())
    totals = next((r for r in reversed(rows) if "totals" in r.data), None)
    counts = {
        # Nodes and edges can number millions: the hourly rollup counts them, the page reads that.
        "nodes": totals.data["totals"]["nodes"] if totals else Node.objects.filter(graph=graph, archived=False).count(),
        "edges": totals.data["totals"]["edges"] if totals else Edge.objects.filter(graph=graph, archived=False).count(),
        "sessions": AgentSession.objects.filter(graph=graph).count(),
        "injections": ContextInjection.objects.filter(graph=graph).count(),
        "batches": UpdateBatch.objects.filter(graph=graph).count(),
    }
    batches = UpdateBatch.objects.filter(graph=graph).order_by("-started_at")[:10]
    figures = (
        [
            ("fig-scores", charts.score_distribution(rows), "Traversal-score percentiles and spread per day"),
            ("fig-updates", charts.updates_by_kind(rows), "Weight updates per day by batch kind"),
            ("fig-top-used", charts.top_used_fraction(rows), "Share of sessions whose top-ranked candidates were used"),
            ("fig-weights", charts.weight_distribution(rows), "Edge weight histogram by edge type"),
        ]
        if rows
        else []
    )
    return render(
        request,
        "feedback/overview.html",
        {
            "access": access,
            "counts": counts,
            "counted_at": totals.computed_at if totals else None,
            "batches": batches,
            "figures": figures,
            "chain": audit.verify(graph.organization_id, full=False),
        },
    )


@login_required
def batch_list(request, graph_id):
    access = graph_access(request.user, graph_id)
    batches = UpdateBatch.objects.filter(graph=access.graph).order_by("-started_at", "-id")
    filters = {k: request.GET.get(k, "") for k in ("kind", "status", "since", "until")}
    if filters["kind"]:
        batches = batches.filter(kind=filters["kind"])
    if filters["status"]:
        batches = batches.filter(status=filters["status"])
    if filters["since"]:
        batches = batches.filter(started_at__date__gte=filters["since"])
    if filters["until"]:
        batches = batches.filter(started_at__date__lte=filters["until"])
    page = Paginator(batches, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "feedback/batches.html",
        {"access": access, "page": page, "filters": filters, "kinds": BATCH_KINDS, "statuses": BATCH_STATUSES},
    )


@login_required
def batch_detail(request, graph_id, batch_id):
    access = graph_access(request.user, graph_id)
    batch = get_object_or_404(
        UpdateBatch.objects.filter(graph=access.graph).select_related("rolled_back_by"), pk=batch_id
    )
    changes = WeightHistory.objects.filter(graph=access.graph, batch=batch).select_related("node", "edge").in_order()
    page = Paginator(changes, 100).get_page(request.GET.get("page"))
    # The distribution chart samples at most 5,000 changes so a million-row batch stays fast.
    sample = list(changes.values_list("before", "after")[:5000])
    figure = (
        charts.figure(
            "Before and after",
            [
                charts.histogram_series("before", [b for b, _ in sample], 0),
                charts.histogram_series("after", [a for _, a in sample], 1),
            ],
            barmode="overlay",
            xaxis={"title": {"text": "value"}},
        )
        if sample
        else None
    )
    return render(request, "feedback/batch.html", {"access": access, "batch": batch, "page": page, "figure": figure})


@login_required
@require_POST
def batch_rollback(request, graph_id, batch_id):
    """One-click rollback (operators): calls the same action as the API, then shows the new batch."""
    access = graph_access(request.user, graph_id, "operate")
    batch = get_object_or_404(UpdateBatch.objects.filter(graph=access.graph), pk=batch_id)
    force = request.POST.get("force") == "on"
    result = actions.do_rollback_batch(batch, actor=request.user, force=force)  # refused: a message (middleware)
    if result.conflicts and not force:
        messages.warning(
            request,
            f"Rolled back batch #{batch.pk} with {result.conflicts} conflict(s): "
            "those rows changed since and were left alone (listed in this batch's details).",
        )
    else:
        messages.success(
            request,
            f"Rolled back batch #{batch.pk}: {result.edge_updates} edge and {result.node_updates} node value(s) "
            "restored.",
        )
    return redirect("batch", graph_id=access.graph.pk, batch_id=result.batch_id)


def _range(request) -> tuple[date, date, str]:
    """The requested days (same rules as the metrics API); a bad range shows the last 30 days and why."""
    try:
        return (*metrics.day_range(request.GET.get("from"), request.GET.get("to")), "")
    except metrics.RangeError as exc:
        return (*metrics.day_range(), f"{exc} Showing the last {metrics.DEFAULT_RANGE_DAYS} days.")


@login_required
def impact(request, graph_id):
    """Feedback impact (analysts): trend charts from the daily rollups, a date range, and CSV export."""
    access = graph_access(request.user, graph_id, "analyze")
    since, until, error = _range(request)
    rows = charts.rollup_rows(access.graph, since, until)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{access.graph.slug}-impact-{since}-{until}.csv"'
        csv.writer(response).writerows(charts.csv_rows(rows))
        return response
    figures = [
        ("impact-weights", charts.mean_weights_by_type(rows), "Mean weight and feedback weight by edge type over time"),
        ("impact-outcomes", charts.outcomes_per_day(rows), "Session outcomes per day"),
        ("impact-updates", charts.updates_by_kind(rows), "Weight changes per day by batch kind"),
    ]
    return render(
        request,
        "feedback/impact.html",
        {"access": access, "since": since, "until": until, "error": error, "rows": rows, "figures": figures},
    )


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
        f"feedback/{kind}.html",
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
    access = graph_access(request.user, graph_id)
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
    return _record_page(
        request,
        access,
        "node",
        node,
        f"History of {node.title}",
        outgoing=outgoing,
        incoming=incoming,
        note_html=render_node_text(node),
    )


@login_required
def edge_detail(request, graph_id, edge_id):
    access = graph_access(request.user, graph_id)
    edge = get_object_or_404(
        Edge.objects.filter(graph=access.graph).select_related("source", "target", "edge_type"), pk=edge_id
    )
    return _record_page(request, access, "edge", edge, "Weight history")
