"""Overview of one graph: counts, latest batches, the audit-chain badge."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from feedback.models import AgentSession, ContextInjection, UpdateBatch
from graphadmin import audit
from graphadmin.models import Edge, Node

from . import metric_figures as mf
from .access import graph_access


@login_required
def overview(request, graph_id):
    access = graph_access(request, graph_id)
    graph = access.graph
    counts = {
        "nodes": Node.objects.filter(graph=graph, archived=False).count(),
        "edges": Edge.objects.filter(graph=graph, archived=False).count(),
        "sessions": AgentSession.objects.filter(graph=graph).count(),
        "injections": ContextInjection.objects.filter(graph=graph).count(),
        "batches": UpdateBatch.objects.filter(graph=graph).count(),
    }
    batches = UpdateBatch.objects.filter(graph=graph).order_by("-started_at")[:10]
    rows = mf.rollup_rows(graph, *mf.default_range())
    figures = [
        ("fig-scores", mf.score_distribution(rows), "Traversal-score percentiles and spread per day"),
        ("fig-updates", mf.updates_by_kind(rows), "Weight updates per day by batch kind"),
        ("fig-top-used", mf.top_used_fraction(rows), "Share of sessions whose top-ranked candidates were used"),
        ("fig-weights", mf.weight_distribution(rows), "Edge weight histogram by edge type"),
    ] if rows else []
    return render(
        request,
        "dashboard/overview.html",
        {"access": access, "counts": counts, "batches": batches, "figures": figures, "chain": audit.verify(graph.organization_id, full=False)},
    )
