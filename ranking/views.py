"""Pages of ranking: recent injections, one injection's candidates and why one beat another, the what-if preview."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from feedback import charts
from feedback.models import ContextInjection, InjectionCandidate
from graphadmin.forms import TuneForm
from graphadmin.models import EdgeType, Node
from graphadmin.tenancy import graph_access
from ranking import service
from ranking.service import RankingInputError

PREVIEW_INJECTIONS = 20


@login_required
def injection_list(request, graph_id):
    """Recent injections, filterable by session id, node (id or key) and date."""
    access = graph_access(request.user, graph_id)
    filters = {k: request.GET.get(k, "").strip() for k in ("session", "node", "since", "until")}
    injections = ContextInjection.objects.filter(graph=access.graph).select_related("session", "policy_revision")
    if filters["session"]:
        injections = injections.filter(session__external_id__icontains=filters["session"])
    if filters["node"]:
        node_q = Q(key=filters["node"]) | (Q(pk=int(filters["node"])) if filters["node"].isdigit() else Q())
        node_ids = list(Node.objects.filter(node_q, graph=access.graph).values_list("pk", flat=True))
        injections = injections.filter(
            pk__in=InjectionCandidate.objects.filter(graph=access.graph, node_id__in=node_ids).values("injection_id")
        )
    if filters["since"]:
        injections = injections.filter(created_at__date__gte=filters["since"])
    if filters["until"]:
        injections = injections.filter(created_at__date__lte=filters["until"])
    page = Paginator(injections.order_by("-created_at", "-id"), 50).get_page(request.GET.get("page"))
    # Candidate counts for this page only (one grouped query), never for the whole history.
    counts = {
        row["injection_id"]: row
        for row in InjectionCandidate.objects.filter(
            graph=access.graph, injection_id__in=[i.pk for i in page.object_list]
        )
        .values("injection_id")
        .annotate(n_candidates=Count("id"), n_selected=Count("id", filter=Q(selected=True)))
    }
    for inj in page.object_list:
        inj.n_candidates = counts.get(inj.pk, {}).get("n_candidates", 0)
        inj.n_selected = counts.get(inj.pk, {}).get("n_selected", 0)
    return render(request, "ranking/explain_list.html", {"access": access, "page": page, "filters": filters})


def _components_figure(candidates: list[dict], titles: dict) -> dict:
    """A stacked bar per candidate: one segment per score component's contribution."""
    names = []
    for c in candidates:
        names.extend(n for n in c["components"] if n not in names)
    labels = [f"#{c['rank']} {titles.get(c['node'], c['node'])}"[:40] for c in candidates]
    series = [
        charts.bar_series(
            name, labels, [c["components"].get(name, {}).get("contribution", 0.0) for c in candidates], index
        )
        for index, name in enumerate(names)
    ]
    return charts.figure(
        "Score components (contribution to the total)", series, barmode="relative", xaxis={"tickangle": -30}
    )


@login_required
def injection_detail(request, graph_id, injection_id):
    """One injection: its candidates (selected and cut), a component chart, and a pairwise comparison."""
    access = graph_access(request.user, graph_id)
    injection = get_object_or_404(
        ContextInjection.objects.filter(graph=access.graph).select_related("session", "policy_revision"),
        pk=injection_id,
    )
    i, j = request.GET.get("i"), request.GET.get("j")
    comparison_error = None
    explained = service.explain(injection)
    try:
        explained["comparison"] = service.compare(
            explained["candidates"], int(i) if i and i.isdigit() else None, int(j) if j and j.isdigit() else None
        )
    except RankingInputError as exc:
        comparison_error = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
    candidates = explained["candidates"]
    titles = dict(
        Node.objects.filter(graph=access.graph, pk__in=[c["node"] for c in candidates]).values_list("pk", "title")
    )
    for c in candidates:
        c["title"] = titles.get(c["node"], "")
    selected = [c for c in candidates if c["selected"]]
    cut = [c for c in candidates if not c["selected"]]
    shown = candidates[:40]
    context = {
        "access": access,
        "injection": injection,
        "explained": explained,
        "selected": selected,
        "cut": cut,
        "component_names": sorted({n for c in candidates for n in c["components"]}),
        "figure": _components_figure(shown, titles) if shown else None,
        "comparison": explained["comparison"],
        "comparison_error": comparison_error,
        "i": i or "",
        "j": j or "",
    }
    template = "ranking/_comparison.html" if request.headers.get("HX-Request") else "ranking/injection.html"
    return render(request, template, context)


@login_required
@require_POST
def tune_preview(request, graph_id):
    """The what-if replay of the form's draft on the last injections (htmx partial). Writes nothing."""
    access = graph_access(request.user, graph_id, "tune")
    edge_types = list(EdgeType.objects.filter(graph=access.graph).order_by("name"))
    form = TuneForm(request.POST, edge_types=edge_types)
    result = None
    if form.is_valid():
        changes = form.changes(access.graph.current_policy())
        changes.pop("ceiling_mode", None)  # does not affect ranking
        priorities = {et.name: value for et, value in form.priority_changes().items()}
        result = service.whatif(access.graph, changes=changes, priorities=priorities, n=PREVIEW_INJECTIONS)
    return render(request, "ranking/_whatif.html", {"access": access, "form": form, "result": result})
