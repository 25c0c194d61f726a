"""Dashboard forms of the graph core."""

from __future__ import annotations

from django import forms

from graphadmin.models import PolicyRevision
from graphadmin.models.policy import CEILING_MODES, POLICY_NUMBERS

# The policy's numbers under plain headings, each with one line of help; a number not listed falls under "Other".
POLICY_GROUPS = (
    (
        "Finding candidates",
        "What retrieval considers at all: how its direct hits are merged, and how far and how wide it follows links.",
        ("rrf_k", "max_hops", "fanout_cap"),
    ),
    (
        "Following links",
        "A link's score decides which notes are reached first from the direct hits.",
        ("coef_weight", "coef_semantic", "coef_priority", "feedback_influence", "carry", "learned_carry"),
    ),
    (
        "Scoring a note",
        "A candidate note's score is a weighted sum of these parts; the highest are given first.",
        (
            "coef_vector",
            "coef_lexical",
            "coef_hop",
            "hop_decay",
            "hop_floor",
            "coef_persona",
            "coef_recency",
            "recency_half_life_days",
            "coef_path",
            "coef_memory",
            "exploration",
        ),
    ),
    (
        "Learning from use",
        "How a reported use (or a flag) moves the weights of the note and the links that brought it.",
        ("learning_rate", "negative_rate", "co_use_min_sessions", "implicit_threshold"),
    ),
    (
        "Learning from outcomes",
        "How a session's outcome moves the feedback weights of everything it was shown.",
        ("ema_alpha", "outcome_accepted", "outcome_rework", "outcome_rejected"),
    ),
    (
        "Forgetting",
        "How links nobody follows lose weight over time.",
        ("decay_rate", "decay_period_days", "weight_floor"),
    ),
    (
        "Context size and agent memory",
        "How much one context answer holds by default, when it gives nothing, and when a remembered note is a "
        "duplicate.",
        ("default_budget_items", "default_budget_tokens", "abstain_floor", "memory_duplicate_threshold"),
    ),
)
PLAIN_LABELS = {
    "rrf_k": "Merging direct hits (0: by score; k: by rank)",
    "max_hops": "Links followed at most",
    "fanout_cap": "Links followed per note at most",
    "coef_weight": "Weight of a link's learned strength",
    "coef_semantic": "Weight of the target's similarity",
    "coef_priority": "Weight of the link type's priority",
    "feedback_influence": "Share of outcome feedback in learned weights",
    "carry": "Share of a note's relevance a link passes on",
    "learned_carry": "How far what agents taught a link moves it for every question",
    "coef_vector": "Similarity to the question",
    "coef_lexical": "Shared words with the question",
    "coef_hop": "Closeness in the graph",
    "hop_decay": "Closeness lost per link",
    "hop_floor": "Closeness of far notes",
    "coef_persona": "The caller's persona",
    "coef_recency": "Recent activity",
    "recency_half_life_days": "Days until recency halves",
    "coef_path": "Learned strength of the link that reached it",
    "coef_memory": "What similar questions used",
    "exploration": "Exploration bonus",
    "learning_rate": "Step up on a use",
    "negative_rate": "Step down on a flag",
    "co_use_min_sessions": "Sessions before two notes used together get a link",
    "implicit_threshold": "Share of a note's phrases that makes a response count as a use",
    "ema_alpha": "Step towards an outcome's score",
    "outcome_accepted": "Score of an accepted session",
    "outcome_rework": "Score of a session needing rework",
    "outcome_rejected": "Score of a rejected session",
    "decay_rate": "Weight kept per period when unused",
    "decay_period_days": "Decay period in days",
    "weight_floor": "Lowest weight decay leaves",
    "default_budget_items": "Items per answer by default",
    "default_budget_tokens": "Tokens per answer by default",
    "abstain_floor": "Confidence below which an answer gives nothing",
    "memory_duplicate_threshold": "Similarity at which a remembered note is a duplicate",
}


class TuneForm(forms.Form):
    """Every policy number (bounded as in POLICY_NUMBERS) plus one priority per edge type."""

    ceiling_mode = forms.ChoiceField(choices=[(m, m) for m in CEILING_MODES])
    note = forms.CharField(max_length=500, required=False, label="Note for the revision")
    # The revision the page showed: a change saved by someone else since is refused (do_set_policy), not undone.
    base_revision = forms.IntegerField(min_value=1, required=False, widget=forms.HiddenInput)

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

    def policy_groups(self):
        """[(heading, help, [(field, plain label, code name)])]: every number once, under its heading."""
        listed = {name for _h, _help, names in POLICY_GROUPS for name in names}
        groups = [(h, help_line, [n for n in names if n in POLICY_NUMBERS]) for h, help_line, names in POLICY_GROUPS]
        others = [n for n in POLICY_NUMBERS if n not in listed]
        if others:
            groups.append(("Other", "Numbers not yet grouped.", others))
        return [
            (heading, help_line, [(self[n], PLAIN_LABELS.get(n, n.replace("_", " ")), n) for n in names])
            for heading, help_line, names in groups
        ]

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
