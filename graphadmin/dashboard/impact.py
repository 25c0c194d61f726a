"""Feedback impact (analysts): trend charts from the daily rollups, a date range, and CSV export."""

from __future__ import annotations

import csv
from datetime import date

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from . import metric_figures as mf
from .access import graph_access

MAX_DAYS = 366


def _range(request) -> tuple[date, date, str]:
    since, until = mf.default_range()
    error = ""
    try:
        if request.GET.get("from"):
            since = date.fromisoformat(request.GET["from"])
        if request.GET.get("to"):
            until = date.fromisoformat(request.GET["to"])
    except ValueError:
        error = "Dates must be YYYY-MM-DD; showing the last 30 days."
        since, until = mf.default_range()
    if since > until:
        error, (since, until) = "The start date was after the end date; they were swapped.", (until, since)
    if (until - since).days >= MAX_DAYS:
        error, since = f"At most {MAX_DAYS} days at once; the range was shortened.", until.fromordinal(until.toordinal() - MAX_DAYS + 1)
    return since, until, error


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
        "dashboard/impact.html",
        {"access": access, "since": since, "until": until, "error": error, "rows": rows, "figures": figures},
    )
