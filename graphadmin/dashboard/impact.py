"""Feedback impact (analysts): trend charts from the daily rollups, a date range, and CSV export."""

from __future__ import annotations

import csv
from datetime import date

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from feedback import metrics

from . import metric_figures as mf
from .access import graph_access


def _range(request) -> tuple[date, date, str]:
    """The requested days (same rules as the metrics API); a bad range shows the last 30 days and why."""
    try:
        return (*metrics.day_range(request.GET.get("from"), request.GET.get("to")), "")
    except metrics.RangeError as exc:
        return (*metrics.day_range(), f"{exc.field}: {exc} Showing the last {metrics.DEFAULT_RANGE_DAYS} days.")


@login_required
def impact(request, graph_id):
    access = graph_access(request, graph_id, needed="analyst")
    since, until, error = _range(request)
    rows = mf.rollup_rows(access.graph, since, until)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{access.graph.slug}-impact-{since}-{until}.csv"'
        csv.writer(response).writerows(mf.csv_rows(rows))
        return response
    figures = [
        ("impact-weights", mf.mean_weights_by_type(rows), "Mean weight and feedback weight by edge type over time"),
        ("impact-outcomes", mf.outcomes_per_day(rows), "Session outcomes per day"),
        ("impact-updates", mf.updates_by_kind(rows), "Weight changes per day by batch kind"),
    ]
    return render(
        request,
        "feedback/impact.html",
        {"access": access, "since": since, "until": until, "error": error, "rows": rows, "figures": figures},
    )
