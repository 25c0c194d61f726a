"""Overview of one graph: counts, latest batches, the audit-chain badge."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from feedback import metrics
from feedback.models import AgentSession, ContextInjection, UpdateBatch
from graphadmin import audit
from graphadmin.models import Edge, Node

from . import metric_figures as mf
from .access import graph_access


@login_required
def overview(request, graph_id):
    access = graph_access(request, graph_id)
    graph = access.graph
    rows = mf.rollup_rows(graph, *metrics.day_range())
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
            ("fig-scores", mf.score_distribution(rows), "Traversal-score percentiles and spread per day"),
            ("fig-updates", mf.updates_by_kind(rows), "Weight updates per day by batch kind"),
            ("fig-top-used", mf.top_used_fraction(rows), "Share of sessions whose top-ranked candidates were used"),
            ("fig-weights", mf.weight_distribution(rows), "Edge weight histogram by edge type"),
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
