"""Update batches: list with filters, detail with paginated changes and a before/after chart."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from feedback import actions
from feedback.models import BATCH_KINDS, BATCH_STATUSES, UpdateBatch, WeightHistory

from . import charts
from .access import graph_access


@login_required
def batch_list(request, graph_id):
    access = graph_access(request, graph_id)
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
        "dashboard/batches.html",
        {"access": access, "page": page, "filters": filters, "kinds": BATCH_KINDS, "statuses": BATCH_STATUSES},
    )


@login_required
def batch_detail(request, graph_id, batch_id):
    access = graph_access(request, graph_id)
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
    return render(request, "dashboard/batch.html", {"access": access, "batch": batch, "page": page, "figure": figure})


@login_required
@require_POST
def batch_rollback(request, graph_id, batch_id):
    """One-click rollback (operators): calls the same action as the API, then shows the new batch."""
    access = graph_access(request, graph_id, needed="operator")
    batch = get_object_or_404(UpdateBatch.objects.filter(graph=access.graph), pk=batch_id)
    force = request.POST.get("force") == "on"
    try:
        result = actions.do_rollback_batch(batch, actor=request.user, force=force)
    except actions.RollbackRefused as exc:
        messages.error(request, str(exc))
        return redirect("batch", graph_id=access.graph.pk, batch_id=batch.pk)
    if result.conflicts and not force:
        messages.warning(
            request,
            f"Rolled back batch #{batch.pk} with {result.conflicts} conflict(s): those rows changed since and were left alone "
            "(listed in this batch's details).",
        )
    else:
        messages.success(
            request,
            f"Rolled back batch #{batch.pk}: {result.edge_updates} edge and {result.node_updates} node value(s) restored.",
        )
    return redirect("batch", graph_id=access.graph.pk, batch_id=result.batch_id)
