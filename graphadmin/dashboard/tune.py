"""Edge types and policy (operators): edit priorities and policy numbers with a what-if preview.

Saving writes a new policy revision and audit events through ``graphadmin.services``; the preview
replays recent injections through ``ranking.service.whatif`` and writes nothing.
"""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from graphadmin import services
from graphadmin.models import EdgeType, PolicyRevision
from graphadmin.models.policy import CEILING_MODES, POLICY_NUMBERS
from ranking import service as ranking

from .access import graph_access

PREVIEW_INJECTIONS = 20


class TuneForm(forms.Form):
    """Every policy number (bounded as in POLICY_NUMBERS) plus one priority per edge type."""

    ceiling_mode = forms.ChoiceField(choices=[(m, m) for m in CEILING_MODES])
    note = forms.CharField(max_length=500, required=False, label="Note for the revision")

    def __init__(self, *args, edge_types, **kwargs):
        super().__init__(*args, **kwargs)
        for name, (_default, lo, hi, integer, help_text) in POLICY_NUMBERS.items():
            field_class = forms.IntegerField if integer else forms.FloatField
            self.fields[name] = field_class(min_value=lo, max_value=hi, help_text=help_text, label=name)
            self.fields[name].widget.attrs["aria-describedby"] = f"id_{name}-help"
            if not integer:
                self.fields[name].widget.attrs["step"] = "any"
        self.edge_types = list(edge_types)
        for et in self.edge_types:
            self.fields[f"priority_{et.pk}"] = forms.FloatField(
                min_value=-1.0,
                max_value=1.0,
                label=f"Priority of {et.name}",
                widget=forms.NumberInput(attrs={"step": "any"}),
            )

    def policy_fields(self):
        return [self[name] for name in POLICY_NUMBERS]

    def priority_fields(self):
        return [(et, self[f"priority_{et.pk}"]) for et in self.edge_types]

    def changes(self, current: PolicyRevision) -> dict:
        """Policy values that differ from the current revision."""
        values = current.numbers()
        wanted = {name: self.cleaned_data[name] for name in [*POLICY_NUMBERS, "ceiling_mode"]}
        return {k: v for k, v in wanted.items() if values[k] != v}

    def priority_changes(self) -> dict:
        """Edge types (objects) whose priority differs, with the new value."""
        return {
            et: self.cleaned_data[f"priority_{et.pk}"]
            for et in self.edge_types
            if self.cleaned_data[f"priority_{et.pk}"] != et.priority
        }


def _initial(current: PolicyRevision, edge_types) -> dict:
    return {**current.numbers(), **{f"priority_{et.pk}": et.priority for et in edge_types}}


def _revision_diffs(graph):
    """Revisions newest first, each with what changed from the one before."""
    revisions = list(PolicyRevision.objects.filter(graph=graph).select_related("created_by").order_by("revision"))
    rows, previous = [], None
    for rev in revisions:
        values = rev.numbers()
        diff = {} if previous is None else {k: (previous[k], v) for k, v in values.items() if previous[k] != v}
        rows.append({"revision": rev, "diff": diff})
        previous = values
    return rows[::-1]


@login_required
def tune(request, graph_id):
    access = graph_access(request, graph_id, needed="operator")
    graph = access.graph
    edge_types = list(EdgeType.objects.filter(graph=graph).order_by("name"))
    current = graph.current_policy()
    if request.method == "POST":
        form = TuneForm(request.POST, edge_types=edge_types)
        if form.is_valid():
            changes, priorities = form.changes(current), form.priority_changes()
            with transaction.atomic():
                for edge_type, value in priorities.items():
                    services.update_edge_type(request.user, edge_type, priority=value)
                if changes:
                    services.set_policy(request.user, graph, changes, note=form.cleaned_data["note"])
            if changes or priorities:
                messages.success(request, f"Saved: {len(changes)} policy value(s), {len(priorities)} priority(ies).")
            else:
                messages.info(request, "Nothing changed.")
            return redirect("tune", graph_id=graph.pk)
    else:
        form = TuneForm(initial=_initial(current, edge_types), edge_types=edge_types)
    return render(
        request,
        "graphadmin/tune.html",
        {"access": access, "form": form, "current": current, "revisions": _revision_diffs(graph)},
    )


@login_required
@require_POST
def preview(request, graph_id):
    """The what-if replay of the form's draft on the last injections (htmx partial). Writes nothing."""
    access = graph_access(request, graph_id, needed="operator")
    edge_types = list(EdgeType.objects.filter(graph=access.graph).order_by("name"))
    form = TuneForm(request.POST, edge_types=edge_types)
    result = None
    if form.is_valid():
        changes = form.changes(access.graph.current_policy())
        changes.pop("ceiling_mode", None)  # does not affect ranking
        priorities = {et.name: value for et, value in form.priority_changes().items()}
        result = ranking.whatif(access.graph, changes=changes, priorities=priorities, n=PREVIEW_INJECTIONS)
    return render(request, "ranking/_whatif.html", {"access": access, "form": form, "result": result})
