"""Pages of ranking: recent injections, one injection's candidates and why one beat another, the what-if preview,
and the abstention floor's calibration (a button of the tune page)."""

from __future__ import annotations

import re

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from feedback import charts
from feedback.models import ContextInjection, InjectionCandidate
from graphadmin import params
from graphadmin.errors import InputError
from graphadmin.forms import TuneForm
from graphadmin.models import Edge, EdgeType, Node, PolicyRevision
from graphadmin.models.policy import priorities_to_restore
from graphadmin.params import date_filters, optional, parse_date, parse_int
from graphadmin.tenancy import graph_access
from ranking import calibration
from ranking.explain import compare, explain, walk_start
from ranking.whatif import MAX_WHATIF_SESSIONS, whatif

PREVIEW_INJECTIONS = 20  # a revision's restore preview: the last 20 sessions
PREVIEW_SESSIONS = 50  # the tune form's what-if, unless the form says otherwise
NODE_ID = re.compile(r"[0-9]{1,18}")  # an id within bigint, ASCII digits only


@login_required
def injection_list(request, graph_id):
    """Recent injections, filterable by session id, node (id or key) and date."""
    access = graph_access(request.user, graph_id)
    filters = {k: request.GET.get(k, "").strip() for k in ("session", "node", "since", "until")}
    days, error = date_filters(filters)
    injections = ContextInjection.objects.filter(graph=access.graph).select_related("session", "policy_revision")
    if filters["session"]:
        injections = injections.filter(session__external_id__icontains=filters["session"])
    if filters["node"]:
        # A key, or an id: ASCII digits only ('²'.isdigit() is true, and int() refuses it).
        node_q = Q(key=filters["node"]) | (Q(pk=int(filters["node"])) if NODE_ID.fullmatch(filters["node"]) else Q())
        node_ids = list(Node.objects.filter(node_q, graph=access.graph).values_list("pk", flat=True))
        injections = injections.filter(
            pk__in=InjectionCandidate.objects.filter(graph=access.graph, node_id__in=node_ids).values("injection_id")
        )
    if days["since"]:
        injections = injections.filter(created_at__date__gte=days["since"])
    if days["until"]:
        injections = injections.filter(created_at__date__lte=days["until"])
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
    return render(
        request, "ranking/explain_list.html", {"access": access, "page": page, "filters": filters, "error": error}
    )


def _components_figure(candidates: list[dict], titles: dict) -> dict:
    """A stacked bar per candidate: one segment per score component's contribution."""
    names = []
    for c in candidates:
        names.extend(n for n in c["components"] if n not in names)
    labels = [f"#{c['rank']} {titles.get(c['node'], c['node'])}"[:40] for c in candidates]
    # Horizontal bars: each candidate's label on its own line at the left (never slanted under the legend),
    # #1 at the top; the legend below the axis title, with the height each label and legend row needs.
    series = [
        charts.bar_series(
            component_words(name),
            [c["components"].get(name, {}).get("contribution", 0.0) for c in candidates],
            labels,
            index,
            orientation="h",
        )
        for index, name in enumerate(names)
    ]
    return charts.figure(
        "Score components (contribution to the total)",
        series,
        barmode="relative",
        height=140 + 24 * len(candidates) + 22 * ((len(names) + 2) // 3),
        margin={"l": 10, "r": 20, "t": 40, "b": 10},
        xaxis={"title": {"text": "contribution"}, "automargin": True},
        yaxis={"autorange": "reversed", "automargin": True, "type": "category"},
        legend={"orientation": "h", "yref": "container", "y": 0, "yanchor": "bottom"},
    )


# How a candidate entered the candidate set, in words (the ``entry`` the pipeline logged).
ENTRY_WORDS = {
    "start": "a start node the agent named",
    "vector": "found by its similarity to the question",
    "lexical": "found by the words it shares with the question (full-text match)",
    "triplet": "found by the similarity of a link (note, link type, note) to the question",
    "expansion": "reached by following edges from an entry point",
}
# The raw factors a comparison sets side by side (feature name, words); the components are the weighted ones.
FACTORS = (
    ("vector", "similarity to the question"),
    ("bm25", "full-text match with the question's words"),
    ("hops", "hops from an entry point"),
    ("path_weight", "weight of the path that reached it"),
    ("feedback_weight", "feedback weight (from outcomes)"),
    ("edge_type", "type of the last edge"),
    ("priority", "priority of that edge type"),
    ("novelty", "novelty (exploration bonus)"),
    ("memory", "use by similar past questions"),
    ("age_days", "age in days"),
    ("persona", "persona match"),
)


def _path_edges(graph, candidates: list[dict]) -> dict[int, dict]:
    """Every edge on the candidates' paths with its ends' titles, type and current weights (one query)."""
    ids = {e for c in candidates for e in c["path"]}
    rows = Edge.objects.filter(graph=graph, pk__in=ids).values(
        "id", "source_id", "source__title", "target_id", "target__title", "edge_type__name", "weight", "feedback_weight"
    )
    return {
        r["id"]: {
            "id": r["id"],
            "source": r["source_id"],
            "source_title": r["source__title"],
            "target": r["target_id"],
            "target_title": r["target__title"],
            "type": r["edge_type__name"],
            "weight": r["weight"],
            "feedback_weight": r["feedback_weight"],
            "text": f"{r['source__title']} -{r['edge_type__name']}-> {r['target__title']}",
        }
        for r in rows
    }


def _path_steps(c: dict, edges: dict[int, dict]) -> list[dict]:
    """The candidate's path as alternating node and edge steps (each a link on the page); [] without a path.
    Read from where the walk started (expansion walks links both ways): a backlink's step is ``backward``."""
    path = [edges[e] for e in c["path"] if e in edges]
    if not path or len(path) != len(c["path"]):
        return []
    at = _walk_start(c, edges)
    titles = {e[end]: e[f"{end}_title"] for e in path for end in ("source", "target")}
    steps = [{"node": at, "title": titles[at]}]
    for e in path:
        backward = e["source"] != at
        at = e["source"] if backward else e["target"]
        steps += [{"edge": e["id"], "type": e["type"], "backward": backward}, {"node": at, "title": titles[at]}]
    return steps


def _walk_start(c: dict, edges: dict[int, dict]) -> int:
    """Where the candidate's path (all of whose edges are in ``edges``) started (ranking.explain.walk_start)."""
    ends = {e: (edges[e]["source"], edges[e]["type"], edges[e]["target"]) for e in c["path"]}
    return walk_start(c["path"], c["node"], ends, c["entry"])


def _entry_text(c: dict, edges: dict[int, dict]) -> str:
    """How the candidate entered, in a sentence: the entry kind, with its similarity or its entry point."""
    words = ENTRY_WORDS.get(c["entry"], c["entry"])
    similarity = c["features"].get("vector")
    if c["entry"] == "vector" and similarity is not None:
        return f"{words} ({similarity:.2f})"
    if c["entry"] == "expansion" and c["path"] and c["path"][0] in edges:
        hops = len(c["path"])
        first = edges[c["path"][0]]
        walked = all(e in edges for e in c["path"])
        title = first["target_title"] if walked and _walk_start(c, edges) != first["source"] else first["source_title"]
        return f"{words}: from {title}, {hops} hop{'s' if hops != 1 else ''}"
    return words


def _shown(value):
    return f"{value:.3f}" if isinstance(value, float) else value


def _signed(value: float) -> str:
    return f"{value:+.3f}".replace("-", "\u2212")


# Each score component in words (any other component shows by its name, so a new one appears the same way).
COMPONENT_WORDS = {
    "vector": "similarity to the question",
    "lexical": "words shared with the question (full-text match)",
    "hop": "closeness to an entry point",
    "persona": "match with the caller's persona",
    "recency": "recency",
    "feedback": "feedback from session outcomes",
    "path": "weight of the links that led to it",
    "priority": "priority of its edge type",
    "memory": "use by agents asking similar questions",
    "exploration": "exploration bonus (not shown to similar questions before)",
    "weight": "learned edge weight",
    "semantic": "similarity of the target to the question",
}
# The component each raw factor feeds (a factor that differs while its component does not is explained).
FACTOR_COMPONENT = {
    "vector": "vector",
    "hops": "hop",
    "path_weight": "path",
    "feedback_weight": "feedback",
    "priority": "priority",
    "novelty": "exploration",
    "memory": "memory",
    "age_days": "recency",
    "persona": "persona",
}
EQUAL = 5e-5  # a difference that rounds to 0.0000 on the page


def component_words(name: str) -> str:
    return COMPONENT_WORDS.get(name, name.replace("_", " "))


def _named(c: dict) -> str:
    return f"“{c['title'] or c['node']}” (#{c['rank']})"


def _listed(rows) -> str:
    parts = [f"{component_words(r['component'])} ({_signed(r['difference'])})" for r in rows]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def why(ci: dict, cj: dict, comparison: dict, edges: dict[int, dict]) -> dict:
    """Why candidate ``ci`` ranked above (or below) ``cj``, in plain words first: both notes by name, the
    components that differ most in words, those that do not differ, raw factors that differ and why one
    weighs nothing, the exploration slot; then which edges the two paths share and which only one took."""
    rows = comparison["components"]
    ahead = [r for r in rows if r["difference"] > EQUAL]
    behind = sorted((r for r in rows if r["difference"] < -EQUAL), key=lambda r: r["difference"])
    equal = [r for r in rows if abs(r["difference"]) <= EQUAL]
    diff = comparison["difference"]
    if abs(diff) <= EQUAL:
        summary = f"{_named(ci)} and {_named(cj)} score the same ({ci['total']:.3f}); the rank order breaks the tie"
    else:
        first, second = (ci, cj) if diff > 0 else (cj, ci)
        summary = f"{_named(first)} ranks above {_named(second)}: {first['total']:.3f} against {second['total']:.3f}"
    plus, minus = (ahead, behind) if diff >= 0 else (behind, ahead)

    # Mirror the signs so the sentence speaks of the winner.
    def _from_winner(rs):
        return [{**r, "difference": r["difference"] if diff >= 0 else -r["difference"]} for r in rs]

    if plus:
        summary += ", mostly on " + _listed(_from_winner(plus[:2]))
    if minus:
        summary += "; it is behind on " + _listed(_from_winner(minus[:2]))
    factors = []
    by_component = {r["component"]: r for r in rows}
    for name, words in FACTORS:
        a, b = ci["features"].get(name), cj["features"].get(name)
        if a is None and b is None:
            continue
        same = a == b if not isinstance(a, float) or not isinstance(b, float) else abs(a - b) < 1e-6
        if same:
            continue
        note = ""
        component = by_component.get(FACTOR_COMPONENT.get(name, ""))
        if component is not None and abs(component["difference"]) <= EQUAL:
            coefficient = ci["components"].get(component["component"], {}).get("coefficient")
            if coefficient == 0:
                note = f"weighs nothing: the policy's coefficient of {component_words(component['component'])} is 0"
            else:
                note = "weighs the same for both: the score caps or floors this factor"
        factors.append({"factor": name, "words": words, "i": _shown(a), "j": _shown(b), "note": note})
    explore = [c for c in (ci, cj) if c["features"].get("cut") == "explore"]
    pi, pj = list(ci["path"]), list(cj["path"])
    return {
        "summary": summary + ".",
        "equal": [component_words(r["component"]) for r in equal],
        "explore": [
            f"{_named(c)} holds the exploration slot: the best candidate no similar past question was shown, "
            "given to the agent although its score alone ranks it lower"
            for c in explore
        ],
        "factors": factors,
        "shared": [edges[e] for e in pi if e in pj and e in edges],
        "only_i": [edges[e] for e in pi if e not in pj and e in edges],
        "only_j": [edges[e] for e in pj if e not in pi and e in edges],
        "steps_i": _path_steps(ci, edges),
        "steps_j": _path_steps(cj, edges),
        "entry_i": ci["entry_text"],
        "entry_j": cj["entry_text"],
    }


@login_required
def injection_detail(request, graph_id, injection_id):
    """One injection: its candidates (selected and cut), a component chart, and a pairwise comparison."""
    access = graph_access(request.user, graph_id)
    injection = get_object_or_404(
        ContextInjection.objects.filter(graph=access.graph).select_related("session", "policy_revision"),
        pk=injection_id,
    )
    i, j = request.GET.get("i"), request.GET.get("j")
    if i is None and j is None:
        i, j = "1", "2"  # why #1 beat #2 unless the form asks for another pair
    comparison_error = None
    explained = explain(injection)
    try:
        pair = (params.parse_id(i, "i") if i else None, params.parse_id(j, "j") if j else None)
        if len(explained["candidates"]) >= 2 or request.GET.get("i") is not None:
            explained["comparison"] = compare(explained["candidates"], *pair)
    except InputError as exc:
        comparison_error = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())
    candidates = explained["candidates"]
    titles = dict(
        Node.objects.filter(graph=access.graph, pk__in=[c["node"] for c in candidates]).values_list("pk", "title")
    )
    edges = _path_edges(access.graph, candidates)
    for c in candidates:
        c["title"] = titles.get(c["node"], "")
        c["steps"] = _path_steps(c, edges)
        c["entry_text"] = _entry_text(c, edges)
    comparison = explained["comparison"]
    if comparison:
        by_rank = {c["rank"]: c for c in candidates}
        comparison["why"] = why(by_rank[comparison["i"]], by_rank[comparison["j"]], comparison, edges)
        comparison["title_i"] = by_rank[comparison["i"]]["title"]
        comparison["title_j"] = by_rank[comparison["j"]]["title"]
        for row in comparison["components"]:
            row["words"] = component_words(row["component"])
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
    result, selection_errors = None, {}
    selection = _selection(request.POST, selection_errors)
    if form.is_valid() and not selection_errors:
        changes = form.changes(access.graph.current_policy())
        priorities = {et.name: value for et, value in form.priority_changes().items()}
        try:
            result = _titled(access.graph, whatif(access.graph, changes=changes, priorities=priorities, **selection))
        except InputError as exc:
            selection_errors = exc.errors
    context = {"access": access, "form": form, "result": result, "selection_errors": selection_errors}
    return render(request, "ranking/_whatif.html", context)


def _selection(data, errors: dict) -> dict:
    """The what-if's session selection from the tune form (``whatif_n``, ``whatif_agent``, ``whatif_since``,
    ``whatif_until``); a bad value is named in ``errors`` (as the API's field names)."""
    selection = {"n": PREVIEW_SESSIONS}
    for name, key, parse, kwargs in (
        ("n", "whatif_n", parse_int, {"low": 1, "high": MAX_WHATIF_SESSIONS}),
        ("since", "whatif_since", parse_date, {}),
        ("until", "whatif_until", parse_date, {}),
    ):
        try:
            value = optional(data, key, parse, **kwargs)
        except InputError as exc:
            errors[name] = [str(m) for ms in exc.errors.values() for m in ms]
            continue
        if value is not None:
            selection[name] = value
    agent = (data.get("whatif_agent") or "").strip()
    if agent:
        selection["agent"] = agent
    if selection.get("since") and selection.get("until") and selection["since"] > selection["until"]:
        errors["until"] = ["On or after the first day."]
    return selection


def _titled(graph, result: dict | None) -> dict | None:
    """The what-if's top-1 items (stable ids ``node:9``, ``edge:5``) with their titles, for the page (two queries)."""
    if not result:
        return result
    ids = {"node": set(), "edge": set()}
    named = [(row, ("top1_current", "top1_draft")) for row in result["injections"]]
    named += [(row, ("top_now", "top_draft")) for row in result.get("flipped", ())]
    for row, keys in named:
        for key in keys:
            kind, _, pk = str(row.get(key) or "").partition(":")
            if kind in ids and pk.isdigit():
                ids[kind].add(int(pk))
    names = {
        f"node:{pk}": title
        for pk, title in Node.objects.filter(graph=graph, pk__in=ids["node"]).values_list("pk", "title")
    }
    for e in Edge.objects.filter(graph=graph, pk__in=ids["edge"]).values(
        "pk", "source__title", "edge_type__name", "target__title"
    ):
        names[f"edge:{e['pk']}"] = f"{e['source__title']} -{e['edge_type__name']}-> {e['target__title']}"
    for row, keys in named:
        for key in keys:
            row[f"{key}_title"] = names.get(row.get(key), row.get(key))
    return result


def restore_changes(current: PolicyRevision, target: PolicyRevision) -> dict:
    """The policy values that restoring ``target`` would change (name -> (now, restored))."""
    now, then = current.numbers(), target.numbers()
    return {k: (now[k], v) for k, v in then.items() if now.get(k) != v}


@login_required
def restore_preview(request, graph_id, revision):
    """Before restoring a revision: what would change (its numbers and its recorded edge-type priorities) and
    the what-if replay of the last injections under them, with the button that restores it (operators).
    Writes nothing."""
    access = graph_access(request.user, graph_id, "tune")
    target = get_object_or_404(PolicyRevision.objects.filter(graph=access.graph), revision=revision)
    current = access.graph.current_policy()
    changes = restore_changes(current, target)
    # Its recorded edge-type priorities, restored with its numbers (name -> (now, restored)).
    priority_changes = {et.name: values for et, values in priorities_to_restore(target).items()}
    ranking_changes = {k: after for k, (_before, after) in changes.items()}
    priorities = {name: after for name, (_before, after) in priority_changes.items()}
    result = (
        whatif(access.graph, changes=ranking_changes, priorities=priorities, n=PREVIEW_INJECTIONS)
        if ranking_changes or priorities
        else None
    )
    result = _titled(access.graph, result)
    context = {"access": access, "target": target, "current": current, "changes": changes, "result": result}
    context["priority_changes"] = priority_changes
    template = "ranking/_restore_preview.html" if request.headers.get("HX-Request") else "ranking/restore_preview.html"
    return render(request, template, context)


@login_required
@require_POST
def tune_calibrate(request, graph_id):
    """Calibrate the abstention floor from the graph's logged answers at the form's target recall and save it as
    a new policy revision (operators; ranking.calibration.do_calibrate_floor, audited); back to the tune page
    with what it did, or with the reason nothing was written."""
    access = graph_access(request.user, graph_id, "tune")
    raw = request.POST.get("target_recall", "").strip() or str(calibration.DEFAULT_TARGET_RECALL)
    try:
        target = float(raw)
        revision, result = calibration.do_calibrate_floor(access.graph, actor=request.user, target_recall=target)
    except ValueError as exc:  # InputError is a ValueError too
        errors = exc.errors if isinstance(exc, InputError) else {"target_recall": ["A number, e.g. 0.95."]}
        text = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
        messages.error(request, f"Abstention floor not calibrated: {text}")
        return redirect("tune", graph_id=access.graph.pk)
    measured = f"floor {result.floor} keeps {result.recall:.1%} of {result.positives} answers that helped"
    if result.abstained_negatives is not None:
        measured += f"; {result.abstained_negatives:.1%} of {result.negatives} rejected answers would abstain"
    if revision is None:
        messages.info(request, f"Abstention floor unchanged ({measured}).")
    else:
        messages.success(request, f"Abstention floor calibrated and saved as r{revision.revision}: {measured}.")
    return redirect("tune", graph_id=access.graph.pk)
