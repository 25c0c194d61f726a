"""Pages of feedback: a graph's overview, update batches (list, detail, rollback), feedback impact,
the node and edge records with their weight history, and the agent sessions (list, one session's story)."""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from feedback import actions, analysis, charts, health, learning, memory, metrics, revisions
from feedback.models import (
    BATCH_KINDS,
    BATCH_STATUSES,
    OUTCOMES,
    STATUS_LABELS,
    AgentSession,
    ContextInjection,
    DailyMetric,
    InjectionCandidate,
    RecordChange,
    UpdateBatch,
    UseEvent,
    VaultImport,
    WeightHistory,
)
from feedback.queries import reads
from graphadmin import audit, readiness
from graphadmin.errors import InputError
from graphadmin.models import Edge, EdgeType, Node, PolicyRevision
from graphadmin.notes.links import render_node_text
from graphadmin.notes.neighbourhood import DEFAULT_EDGES, MAX_EDGES, edge_type_param
from graphadmin.params import date_filters, optional, parse_int
from graphadmin.tenancy import graph_access

HISTORY_LIMIT = 500


def _agents(request, rows) -> tuple[metrics.AgentFilter, str]:
    """The page's agent filter (``?agent=``, repeated; none: every session) among the agents of the rollup
    ``rows``; a bad name shows every session and says why."""
    try:
        return metrics.agent_filter(request.GET.getlist("agent"), rows), ""
    except InputError as exc:
        return metrics.agent_filter([], rows), f"{exc} Showing every agent's sessions."


@login_required
def overview(request, graph_id):
    """Overview of one graph: counts, learning at a glance (weekly, from the ledgers), latest batches,
    metric charts (daily, from the rollup), the audit-chain badge; the session figures for the agents
    of the filter (load tests and probes can be left out)."""
    access = graph_access(request.user, graph_id)
    graph = access.graph
    all_rows = charts.rollup_rows(graph, *metrics.day_range())
    agents, agent_error = _agents(request, all_rows)
    rows = metrics.for_agents(all_rows, agents)
    totals = next((r for r in reversed(all_rows) if "totals" in r.data), None)
    counts = {
        # Nodes and edges can number millions: the hourly rollup counts them, the page reads that.
        "nodes": totals.data["totals"]["nodes"] if totals else Node.objects.filter(graph=graph, archived=False).count(),
        "edges": totals.data["totals"]["edges"] if totals else Edge.objects.filter(graph=graph, archived=False).count(),
        **reads.graph_counts(graph),
    }
    batches = UpdateBatch.objects.filter(graph=graph).order_by("-started_at")[:10]
    glance = learning.weekly(graph, agents=agents)
    figures = (
        _marked(
            [
                ("fig-scores", charts.score_distribution(rows), "Traversal-score percentiles and spread per day"),
                ("fig-updates", charts.updates_by_kind(rows), "Weight updates per day by batch kind"),
                (
                    "fig-top-used",
                    charts.top_used_fraction(rows),
                    "Share of sessions whose top-ranked candidates were used",
                ),
                ("fig-weights", charts.weight_distribution(rows), "Edge weight histogram by edge type"),
            ],
            _policy_marks(graph, all_rows[0].day, all_rows[-1].day),
            keep=("fig-weights",),  # not a time chart
        )
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
            # Live, not from the rollup: it says whether the graph is ready now (graphadmin.readiness).
            "ready": readiness.readiness(graph.pk),
            "batches": batches,
            "glance": glance,
            "glance_figure": charts.learning_at_a_glance(glance) if glance.has_sessions else None,
            "agents": agents,
            "agent_error": agent_error,
            "figures": figures,
            "chain": audit.verify(graph.organization_id, full=False),
            # Background imports (uploads above VAULT_IMPORT_ASYNC_BYTES) and their progress.
            "imports": VaultImport.objects.filter(graph=graph).defer("archive").order_by("-created_at", "-id")[:5],
        },
    )


@login_required
def batch_list(request, graph_id):
    access = graph_access(request.user, graph_id)
    batches = UpdateBatch.objects.filter(graph=access.graph).order_by("-started_at", "-id")
    filters = {k: request.GET.get(k, "").strip() for k in ("kind", "status", "since", "until")}
    days, error = date_filters(filters)
    if filters["kind"]:
        batches = batches.filter(kind=filters["kind"])
    if filters["status"] in BATCH_STATUSES:
        batches = batches.filter(status=filters["status"])
    elif filters["status"]:
        error = "; ".join(filter(None, [error, f"status: expected one of {', '.join(BATCH_STATUSES)} (not applied)"]))
    if days["since"]:
        batches = batches.filter(started_at__date__gte=days["since"])
    if days["until"]:
        batches = batches.filter(started_at__date__lte=days["until"])
    page = Paginator(batches, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "feedback/batches.html",
        {
            "access": access,
            "page": page,
            "filters": filters,
            "error": error,
            "kinds": BATCH_KINDS,
            "statuses": STATUS_LABELS,
        },
    )


CONFLICTS_SHOWN = 25


def _conflict_rows(graph, rollback) -> list[dict]:
    """The conflicts of a rollback batch as rows a person reads: the node or edge by name, the field, the
    value the rollback would have restored, the value now, and the batch that changed it since (the newest
    change of that field not made by the rollback). At most CONFLICTS_SHOWN rows, two queries each."""
    rows = []
    for key, ids in (rollback.details or {}).get("conflict_ids", {}).items():
        kind, _, field = key.partition(".")
        model = Node if kind == "node" else Edge
        if kind not in ("node", "edge") or not ids:
            continue
        targets = model.objects.filter(graph=graph, pk__in=ids[:CONFLICTS_SHOWN])
        if kind == "edge":
            targets = targets.select_related("source", "target", "edge_type")
        by_id = {t.pk: t for t in targets}
        for target_id in ids:
            if len(rows) >= CONFLICTS_SHOWN or target_id not in by_id:
                continue
            target = by_id[target_id]
            history = list(reads.history_of(graph, kind, target_id, field=field, latest=50))
            wanted = next((h.before for h in history if h.batch_id == rollback.rollback_of_id), None)
            since = next((h for h in history if h.batch_id not in (rollback.pk, rollback.rollback_of_id)), None)
            name = (
                target.title
                if kind == "node"
                else f"{target.source.title} -{target.edge_type.name}-> {target.target.title}"
            )
            rows.append(
                {
                    "kind": kind,
                    "id": target_id,
                    "name": name,
                    "field": field,
                    "wanted": wanted,
                    "now": getattr(target, field),
                    "since": since.batch if since else None,
                    "since_at": since.created_at if since else None,
                }
            )
    return rows


@login_required
def health_page(request, graph_id):
    """Learning health (feedback.health) over the last ``n`` injections: every role that reads the graph."""
    access = graph_access(request.user, graph_id, "read")
    error = ""
    try:
        n = optional(request.GET, "n", parse_int, low=1, high=health.MAX_INJECTIONS) or health.DEFAULT_INJECTIONS
    except InputError as exc:
        n, error = health.DEFAULT_INJECTIONS, f"{exc} Showing the last {health.DEFAULT_INJECTIONS}."
    data = health.graph_health(access.graph, n=n)
    return render(request, "feedback/health.html", {"access": access, "health": data, "n": n, "error": error})


def _named_conflicts(graph, conflict_ids: dict) -> list[dict]:
    """The first CONFLICTS_SHOWN conflicting rows of a preview by name: [{kind, id, name, field}] (two queries)."""
    wanted = {"node": set(), "edge": set()}
    listed = []
    for key, ids in (conflict_ids or {}).items():
        kind, _, field = key.partition(".")
        for target_id in ids:
            if kind in wanted and len(listed) < CONFLICTS_SHOWN:
                wanted[kind].add(target_id)
                listed.append((kind, target_id, field))
    names = {
        ("node", pk): title
        for pk, title in Node.objects.filter(graph=graph, pk__in=wanted["node"]).values_list("pk", "title")
    }
    for e in Edge.objects.filter(graph=graph, pk__in=wanted["edge"]).values(
        "pk", "source__title", "edge_type__name", "target__title"
    ):
        names[("edge", e["pk"])] = f"{e['source__title']} -{e['edge_type__name']}-> {e['target__title']}"
    return [
        {"kind": kind, "id": pk, "name": names.get((kind, pk), f"{kind} {pk}"), "field": field or "row"}
        for kind, pk, field in listed
    ]


@login_required
def batch_detail(request, graph_id, batch_id):
    access = graph_access(request.user, graph_id)
    batch = get_object_or_404(
        UpdateBatch.objects.filter(graph=access.graph).select_related(
            "rolled_back_by", "rollback_of", "trigger_session"
        ),
        pk=batch_id,
    )
    changes = (
        WeightHistory.objects.filter(graph=access.graph, batch=batch)
        .select_related("node", "edge__source", "edge__target", "edge__edge_type")
        .in_order()
    )
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
    # What a memory or import batch (or their rollback) wrote: its row changes, the fields each changed.
    row_changes = RecordChange.objects.filter(graph_id=access.graph.pk, batch=batch).order_by("pk")
    records = list(row_changes[:200])
    # Every edge the page lists (row changes, created or archived links) by name: "A -> type -> B" (one query).
    details = batch.details or {}
    edge_ids = {r.record_id for r in records if r.target == "edge"}
    edge_ids.update(details.get("created_edges") or details.get("edges") or [])
    edge_names = {
        e.pk: e.label
        for e in Edge.objects.filter(graph=access.graph, pk__in=edge_ids).select_related(
            "source", "target", "edge_type"
        )
    }
    node_names = dict(
        Node.objects.filter(
            graph=access.graph, pk__in=[r.record_id for r in records if r.target == "node"]
        ).values_list("pk", "title")
    )
    for r in records:
        r.fields = sorted(k for k in r.after if r.before.get(k) != r.after[k])
        r.name = (edge_names if r.target == "edge" else node_names).get(r.record_id) or f"{r.target} {r.record_id}"
    listed_edges = [
        {"id": e, "name": edge_names.get(e, f"edge {e}")}
        for e in (details.get("created_edges") or details.get("edges") or [])
    ]
    # A rollback that left conflicts alone undid only part of the batch, stored as its status
    # (partially_rolled_back): said so, with the conflicts, on both batches' pages.
    rollback = batch if batch.rollback_of_id else getattr(batch, "rolled_back_by", None)
    undone = batch.rollback_of if batch.rollback_of_id else batch
    partial = bool(rollback and undone.status == "partially_rolled_back")
    conflicts = _conflict_rows(access.graph, rollback) if partial else []
    context = {"access": access, "batch": batch, "page": page, "figure": figure, "records": records}
    context["listed_edges"] = listed_edges
    context["records_total"] = row_changes.count() if len(records) == 200 else len(records)
    context.update(rollback=rollback, partial=partial, conflict_rows=conflicts)
    # Previews (writing nothing): finishing a partial rollback always; a rollback when asked (?preview=1).
    context["finish_preview"] = actions.preview_rollback(batch, finish=True) if partial else None
    if batch.status == "applied" and request.GET.get("preview") == "1":
        context["preview"] = actions.preview_rollback(batch)
        context["preview_conflicts"] = _named_conflicts(access.graph, context["preview"].conflict_ids)
    context["undoes"] = batch.rollback_of if batch.rollback_of_id else None
    context["finishes"] = (batch.details or {}).get("finishes_rollback")
    return render(request, "feedback/batch.html", context)


@login_required
@require_POST
def batch_rollback(request, graph_id, batch_id):
    """One-click rollback (operators): calls the same action as the API, then shows the new batch."""
    access = graph_access(request.user, graph_id, "operate")
    batch = get_object_or_404(UpdateBatch.objects.filter(graph=access.graph), pk=batch_id)
    force = request.POST.get("force") == "on"
    result = actions.do_rollback_batch(batch, actor=request.user, force=force)  # refused: a message (middleware)
    what = "Undid rollback" if batch.kind == "rollback" else "Rolled back batch"
    restored = f"{result.edge_updates} edge and {result.node_updates} node value(s) restored"
    if not (result.edge_updates or result.node_updates):
        restored = "nothing restored"
    if result.conflicts and not force:
        messages.warning(
            request,
            f"{what} #{batch.pk} only in part: {restored}; {result.conflicts} conflict(s) left as they were "
            "(changed since: listed below).",
        )
    elif not (result.edge_updates or result.node_updates):
        messages.warning(request, f"{what} #{batch.pk}: nothing restored (every value was already as wanted).")
    else:
        messages.success(request, f"{what} #{batch.pk}: {restored}.")
    return redirect("batch", graph_id=access.graph.pk, batch_id=result.batch_id)


@login_required
@require_POST
def batch_finish_rollback(request, graph_id, batch_id):
    """Finish a partial rollback (operators): force the rows it left alone, with the same action as the API."""
    access = graph_access(request.user, graph_id, "operate")
    batch = get_object_or_404(UpdateBatch.objects.filter(graph=access.graph), pk=batch_id)
    result = actions.do_finish_rollback(batch, actor=request.user)  # refused: a message (middleware)
    restored = f"{result.edge_updates} edge and {result.node_updates} node value(s)"
    if not (result.edge_updates or result.node_updates):
        restored = "nothing (the remaining values were already as wanted)"
    messages.success(request, f"Finished the rollback of batch #{batch.rollback_of_id or batch.pk}: forced {restored}.")
    return redirect("batch", graph_id=access.graph.pk, batch_id=result.batch_id)


IMPACT_DEFAULT_DAYS = 84  # the impact page's default range: 12 weeks, so a policy change of last month shows


def _range(request, default_days: int = metrics.DEFAULT_RANGE_DAYS) -> tuple[date, date, str]:
    """The requested days (same rules as the metrics API; ``default_days`` when ``from`` is not given); a bad
    range shows the default and why."""
    since = request.GET.get("from")
    until = request.GET.get("to")
    try:
        if not since:
            end = metrics.day_range(None, until)[1]
            since = (end - timedelta(days=default_days - 1)).isoformat()
        return (*metrics.day_range(since, until), "")
    except metrics.RangeError as exc:
        end = metrics.day_range()[1]
        return end - timedelta(days=default_days - 1), end, f"{exc} Showing the last {default_days} days."


def _policy_marks(graph, since: date, until: date) -> list[dict]:
    """The policy changes and decay runs of the days [since, until], for the time charts' marks."""
    return learning.marks_between(graph, *analysis.day_bounds(since, until))


def _marked(figures, marks, keep=()):
    """``figures`` ((id, figure, label), ...) with the marks drawn on each time chart (ids not in ``keep``)."""
    return [(i, fig if i in keep else charts.with_marks(fig, marks), label) for i, fig, label in figures]


@login_required
def impact(request, graph_id):
    """Feedback impact (analysts): the rank-dependent measures per week or over a rolling 7 days, with their
    intervals and n; before and after a revision over a chosen window; trend charts from the daily rollups with
    the policy changes marked; a date range, the agent filter and CSV export."""
    access = graph_access(request.user, graph_id, "analyze")
    since, until, error = _range(request, IMPACT_DEFAULT_DAYS)
    all_rows = charts.rollup_rows(access.graph, since, until)
    agents, agent_error = _agents(request, all_rows)
    rows = metrics.for_agents(all_rows, agents)
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv")
        response["Content-Disposition"] = f'attachment; filename="{access.graph.slug}-impact-{since}-{until}.csv"'
        glance = learning.weekly(access.graph, agents=agents)
        effects = revisions.revision_effects(access.graph, agents)
        csv.writer(response).writerows(charts.csv_export(rows, glance, effects, agents))
        return response
    marks = _policy_marks(access.graph, since, until)
    every = "rolling" if request.GET.get("every") == "rolling" else "week"
    # The sessions of the range (and, for the before/after, of the window either side of the revision).
    compare, compare_error = _before_after_choice(request, access.graph)
    lo, hi = analysis.day_bounds(since, until)
    if compare:
        lo = min(lo, compare["at"] - timedelta(days=compare["days"]))
        hi = max(hi, compare["at"] + timedelta(days=compare["days"]))
    sessions = analysis.load(access.graph, lo, hi, agents)
    in_range = [
        s for s in sessions if analysis.day_bounds(since, until)[0] <= s.started < analysis.day_bounds(since, until)[1]
    ]
    periods = (
        analysis.rolling(in_range, since, until) if every == "rolling" else analysis.weekly(in_range, since, until)
    )
    ba = analysis.before_after(sessions, compare["revision"], compare["at"], compare["days"]) if compare else None
    figures = _marked(
        [
            (
                "impact-weights",
                charts.mean_weights_by_type(rows),
                "Mean weight and feedback weight by edge type over time",
            ),
            (
                "impact-top-used",
                charts.top_used_fraction(rows),
                "Share of sessions whose top-ranked candidates were used",
            ),
            ("impact-outcomes", charts.outcomes_per_day(rows), "Session outcomes per day"),
            ("impact-updates", charts.updates_by_kind(rows), "Weight changes per day by batch kind"),
        ],
        marks,
    )
    return render(
        request,
        "feedback/impact.html",
        {
            "access": access,
            "since": since,
            "until": until,
            "error": error or compare_error,
            "rows": rows,
            "figures": figures,
            "agents": agents,
            "agent_error": agent_error,
            "keep": [("from", since.isoformat()), ("to", until.isoformat())],
            "every": every,
            "periods": periods,
            "rank_figure": charts.rank_measures(periods, marks, rolling=every == "rolling") if in_range else None,
            "compare": compare,
            "before_after": ba,
            "before_after_figure": charts.before_after(ba) if ba else None,
            "revisions": list(
                PolicyRevision.objects.filter(graph=access.graph, revision__gt=1)
                .order_by("-revision")
                .values_list("revision", "created_at", "note")
            ),
            "windows": analysis.WINDOWS,
            "sessions_csv": access.can_analyze,
        },
    )


def _before_after_choice(request, graph) -> tuple[dict | None, str]:
    """The revision (``?revision=N``, default the latest after r1) and window (``?window=7|14|30``, default 14)
    of the before/after comparison; None when the graph has no revision after its first. A bad value: the
    default, and why."""
    error = ""
    raw_rev, raw_window = request.GET.get("revision", ""), request.GET.get("window", "")
    window = 14
    if raw_window:
        try:
            window = int(raw_window)
            if window not in analysis.WINDOWS:
                raise ValueError
        except ValueError:
            error, window = f"window: expected one of {', '.join(map(str, analysis.WINDOWS))} days (not applied).", 14
    revisions_ = PolicyRevision.objects.filter(graph=graph, revision__gt=1)
    chosen = None
    if raw_rev:
        try:
            chosen = revisions_.filter(revision=parse_int(raw_rev, "revision", low=2)).first()
        except InputError:
            chosen = None
        if chosen is None:
            error = "; ".join(filter(None, [error, "revision: no such revision after r1 (showing the latest)."]))
    chosen = chosen or revisions_.order_by("-revision").first()
    if chosen is None:
        return None, error
    return {"revision": chosen.revision, "at": chosen.created_at, "days": window, "note": chosen.note}, error


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
    latest = list(reads.history_of(access.graph, kind, record.pk, latest=HISTORY_LIMIT))  # newest first
    # The session that caused each of the latest changes (one query), so each row links to that session's page.
    session_ids = {c.batch.trigger_session_id for c in latest[:20] if c.batch.trigger_session_id}
    external = dict(
        AgentSession.objects.filter(graph=access.graph, pk__in=session_ids).values_list("pk", "external_id")
    )
    for c in latest[:20]:
        c.session_external_id = external.get(c.batch.trigger_session_id, "")
    return render(
        request,
        f"feedback/{kind}.html",
        {
            "access": access,
            kind: record,
            "changes": latest[:20],
            "history": charts.with_marks(
                _history_figure(title, latest[::-1]),
                learning.marks_between(
                    access.graph, latest[-1].created_at, latest[0].created_at + timedelta(seconds=1)
                ),
            )
            if latest
            else None,
            **context,
        },
    )


@login_required
def node_detail(request, graph_id, node_id):
    access = graph_access(request.user, graph_id)
    node = get_object_or_404(Node.objects.filter(graph=access.graph).select_related("created_by"), pk=node_id)
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
        **_neighbourhood_filters(request, access.graph.pk, node.pk),
        outgoing=outgoing,
        incoming=incoming,
        note_html=render_node_text(node),
        written_by=node.created_by.get_username() if node.created_by_id else None,
        versions=memory.node_versions(node),
    )


def _neighbourhood_filters(request, graph_id: int, node_id: int) -> dict:
    """The node page's graph-view filters (``hops``, ``type``, ``limit``; bad ones fall back to the defaults,
    said on the page) and the URL of the graph view's JSON under them."""
    error = ""
    values = {"hops": 2, "type": "", "limit": DEFAULT_EDGES}
    try:
        values["hops"] = parse_int(request.GET.get("hops") or "2", "hops", low=1, high=2)
        values["limit"] = parse_int(request.GET.get("limit") or str(DEFAULT_EDGES), "limit", low=1, high=MAX_EDGES)
        values["type"] = edge_type_param(graph_id, request.GET.get("type", ""))
    except InputError as exc:
        error = f"{exc} Showing the defaults."
        values = {"hops": 2, "type": "", "limit": DEFAULT_EDGES}
    url = reverse("graph-neighbourhood", args=[graph_id, node_id]) + "?" + urlencode(values)
    types = EdgeType.objects.filter(graph_id=graph_id).order_by("name").values_list("name", flat=True)
    return {
        "graph_url": url,
        "graph_filters": values,
        "graph_filter_error": error,
        "edge_types": list(types),
        "max_edges": MAX_EDGES,
    }


@login_required
def edge_detail(request, graph_id, edge_id):
    access = graph_access(request.user, graph_id)
    edge = get_object_or_404(
        Edge.objects.filter(graph=access.graph).select_related("source", "target", "edge_type"), pk=edge_id
    )
    return _record_page(request, access, "edge", edge, "Weight history")


# --------------------------------------------------------------------------------------------------
# Agent sessions: the list, and one session's injections, use reports, outcome and batches in time order

SESSION_PAGE = 50
CUT_SHOWN = 10


@login_required
def session_list(request, graph_id):
    """The graph's agent sessions, newest first, filterable by outcome, date and the text of their questions."""
    access = graph_access(request.user, graph_id)
    filters = {k: request.GET.get(k, "").strip() for k in ("outcome", "since", "until", "q")}
    error = ""
    for name in ("since", "until"):
        if filters[name] and not _is_date(filters[name]):
            error, filters[name] = f"{name}: expected a date, YYYY-MM-DD (not applied).", ""
    sessions = AgentSession.objects.filter(graph=access.graph)
    if filters["outcome"] == "none":
        sessions = sessions.filter(outcome__isnull=True)
    elif filters["outcome"] in OUTCOMES:
        sessions = sessions.filter(outcome=filters["outcome"])
    if filters["since"]:
        sessions = sessions.filter(started_at__date__gte=filters["since"])
    if filters["until"]:
        sessions = sessions.filter(started_at__date__lte=filters["until"])
    if filters["q"]:
        sessions = sessions.filter(
            pk__in=ContextInjection.objects.filter(graph=access.graph, query__icontains=filters["q"]).values(
                "session_id"
            )
        )
    if request.GET.get("format") == "csv":
        return _sessions_csv(request, access.graph, sessions)
    page = Paginator(sessions.order_by("-started_at", "-id"), SESSION_PAGE).get_page(request.GET.get("page"))
    ids = [s.pk for s in page.object_list]
    # Per page only (grouped queries): injections and their first question, use reports, batches.
    questions: dict[int, str] = {}
    n_injections: dict[int, int] = {}
    for sid, query in (
        ContextInjection.objects.filter(graph=access.graph, session_id__in=ids)
        .order_by("session_id", "created_at", "id")
        .values_list("session_id", "query")
    ):
        n_injections[sid] = n_injections.get(sid, 0) + 1
        questions.setdefault(sid, query)
    uses = dict(
        UseEvent.objects.filter(graph=access.graph, session_id__in=ids)
        .values("session_id")
        .annotate(n=Count("id"))
        .values_list("session_id", "n")
    )
    batches = dict(
        UpdateBatch.objects.filter(graph=access.graph, trigger_session_id__in=ids)
        .values("trigger_session_id")
        .annotate(n=Count("id"))
        .values_list("trigger_session_id", "n")
    )
    for s in page.object_list:
        s.question = questions.get(s.pk, "")
        s.n_injections, s.n_uses, s.n_batches = n_injections.get(s.pk, 0), uses.get(s.pk, 0), batches.get(s.pk, 0)
    return render(
        request,
        "feedback/sessions.html",
        {"access": access, "page": page, "filters": filters, "outcomes": OUTCOMES, "error": error},
    )


SESSIONS_CSV_HEADER = ["session", "agent", "started", "outcome", "policy_revision", "first_used_rank", "top_item_used"]


def _sessions_csv(request, graph, sessions):
    """The sessions of the list's filters, one line each (analysts): session, agent (the owner's user name),
    started, outcome, the policy revision of its first retrieval, the rank of the first item it used and
    whether that was the top item (empty for a session with no retrieval; "none" rank when nothing given was used)."""
    access = graph_access(request.user, graph.pk, "analyze")
    ranks = {
        r.session_id: r
        for r in analysis.load(graph, datetime(1970, 1, 1, tzinfo=UTC), datetime.now(UTC) + timedelta(days=1))
    }
    rows = list(
        sessions.order_by("started_at", "id").values_list(
            "pk", "external_id", "owner__username", "started_at", "outcome"
        )
    )
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{access.graph.slug}-sessions.csv"'
    writer = csv.writer(response)
    writer.writerow(SESSIONS_CSV_HEADER)
    for pk, external_id, agent, started, outcome in rows:
        r = ranks.get(pk)
        writer.writerow(
            [
                charts.csv_cell(external_id),
                charts.csv_cell(agent or ""),
                started.isoformat(),
                outcome or "",
                r.revision if r else "",
                (r.first_used_rank or "none") if r else "",
                ("yes" if r.top_used else "no") if r else "",
            ]
        )
    return response


def _is_date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


@login_required
def session_detail(request, graph_id, external_id):
    """One agent session, in time order: each injection (its question, what it gave and what it cut), each
    use report, the outcome, and every batch the session caused with its weight changes."""
    access = graph_access(request.user, graph_id)
    graph = access.graph
    session = get_object_or_404(
        AgentSession.objects.filter(graph=graph).select_related("owner"), external_id=external_id
    )
    injections = list(
        ContextInjection.objects.filter(graph=graph, session=session)
        .select_related("policy_revision")
        .order_by("created_at", "id")
    )
    candidates = (
        InjectionCandidate.objects.filter(graph=graph, injection__in=injections)
        .select_related("node")
        .order_by("injection_id", "rank")
    )
    by_injection: dict[int, dict] = {i.pk: {"given": [], "cut": [], "n_cut": 0} for i in injections}
    for c in candidates:
        slot = by_injection[c.injection_id]
        if c.selected:
            slot["given"].append(c)
        else:
            slot["n_cut"] += 1
            if len(slot["cut"]) < CUT_SHOWN:
                slot["cut"].append(c)
    events = [{"kind": "injection", "at": i.created_at, "injection": i, **by_injection[i.pk]} for i in injections]
    reports: dict[tuple, list] = {}
    for use in (
        UseEvent.objects.filter(graph=graph, session=session)
        .select_related("node", "edge__source", "edge__target", "edge__edge_type")
        .order_by("created_at", "id")
    ):
        # One report (one API call) writes its events in one statement, with one time.
        reports.setdefault((use.created_at, use.source), []).append(use)
    events += [{"kind": "uses", "at": at, "source": source, "uses": uses} for (at, source), uses in reports.items()]
    batches = list(UpdateBatch.objects.filter(graph=graph, trigger_session=session).order_by("started_at", "id"))
    changes: dict[int, list] = {b.pk: [] for b in batches}
    for change in (
        WeightHistory.objects.filter(graph=graph, batch_id__in=list(changes))
        .select_related("node", "edge__source", "edge__target", "edge__edge_type")
        .in_order()
    ):
        changes[change.batch_id].append(change)
    events += [{"kind": "batch", "at": b.started_at, "batch": b, "changes": changes[b.pk]} for b in batches]
    if session.outcome_at:
        events.append({"kind": "outcome", "at": session.outcome_at, "outcome": session.outcome})
    order = {"injection": 0, "uses": 1, "outcome": 2, "batch": 3}
    events.sort(key=lambda e: (e["at"], order[e["kind"]]))
    return render(
        request,
        "feedback/session.html",
        {
            "access": access,
            "session": session,
            "events": events,
            # What the session wrote (agent memory): the notes its memory batches created or changed.
            "written": Node.objects.filter(
                graph=graph,
                pk__in=RecordChange.objects.filter(
                    graph_id=graph.pk, target="node", batch__trigger_session=session, batch__kind="memory"
                ).values("record_id"),
            ).order_by("pk"),
            "counts": {
                "injections": len(injections),
                "uses": sum(len(u) for u in reports.values()),
                "batches": len(batches),
                "changes": sum(len(c) for c in changes.values()),
            },
        },
    )


@login_required
def policy_effects(request, graph_id):
    """Per policy revision, the share of sessions whose top-ranked items were used before and after it took
    effect (analysts; from the daily rollups). The tune page loads it as a partial."""
    access = graph_access(request.user, graph_id, "analyze")
    agents, agent_error = _agents(request, DailyMetric.objects.filter(graph=access.graph).only("data"))
    context = {
        "access": access,
        "effects": revisions.revision_effects(access.graph, agents),
        "agents": agents,
        "agent_error": agent_error,
    }
    template = "feedback/_policy_effects.html" if request.headers.get("HX-Request") else "feedback/policy_effects.html"
    return render(request, template, context)
