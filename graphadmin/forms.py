"""Dashboard forms of the graph core."""

from __future__ import annotations

from django import forms

from graphadmin.models import PolicyRevision
from graphadmin.models.policy import CEILING_MODES, POLICY_NUMBERS


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
