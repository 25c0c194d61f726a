"""The per-graph learning and ranking policy, versioned: every change is a new revision.

POLICY_NUMBERS is the single table of every number with its default and valid range; the
model's fields, its database check constraints and the API's validation are all built from it.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from graphadmin import clock

from .graph import EdgeType, Graph
from .tenancy import TenantQuerySet

# name: (default, minimum, maximum, integer?, help)
POLICY_NUMBERS: dict[str, tuple[float, float, float, bool, str]] = {
    # Traversal score: weighted sum of stored weight, semantic proximity and type priority.
    "coef_weight": (0.5, 0.0, 5.0, False, "Coefficient of the edge's stored weight in the traversal score."),
    "coef_semantic": (0.35, 0.0, 5.0, False, "Coefficient of the target's cosine similarity to the query."),
    "coef_priority": (0.15, 0.0, 5.0, False, "Coefficient of the edge type's priority."),
    "feedback_influence": (0.3, 0.0, 1.0, False, "Share of the weight term taken by the edge's feedback_weight (EMA)."),
    # Hybrid retrieval factors.
    # Node score of a retrieval candidate (entry point, start node or expanded node).
    "coef_vector": (0.6, 0.0, 5.0, False, "Coefficient of the node's cosine similarity to the query in its score."),
    "coef_lexical": (
        0.3,
        0.0,
        5.0,
        False,
        "Coefficient of the node's lexical score (BM25 over its title, aliases and text, normalised per query).",
    ),
    "rrf_k": (
        0,
        0,
        1000,
        True,
        "Entry fusion of the vector and lexical sides: 0, weighted sum of per-query-normalised scores; "
        "k > 0, reciprocal-rank fusion (k + 1) / (k + rank) per side.",
    ),
    "coef_hop": (0.2, 0.0, 5.0, False, "Coefficient of the hop (proximity) factor in a node's score."),
    "coef_persona": (0.1, 0.0, 5.0, False, "Coefficient of caller-provided persona affinity in a node's score."),
    "coef_recency": (0.1, 0.0, 5.0, False, "Coefficient of recency in a node's score."),
    "coef_path": (
        0.0,
        0.0,
        5.0,
        False,
        "Coefficient of the reinforcement weight of the edge that reached a node (around neutral 0.5); "
        "0: edges steer expansion only.",
    ),
    "coef_memory": (
        0.2,
        0.0,
        5.0,
        False,
        "Coefficient of what agents asking similar questions made of a node (used, flagged).",
    ),
    "exploration": (
        0.03,
        0.0,
        1.0,
        False,
        "Bonus for candidates that similar past retrievals rarely surfaced; 0 changes no order.",
    ),
    "carry": (
        0.9,
        0.0,
        0.99,
        False,
        "Share of a note's relevance a link passes to the note it reaches in expansion (raised by the link's "
        "weight and type priority, lowered at hubs); 0: what expansion reaches competes on its own match only.",
    ),
    "learned_carry": (
        0.0,
        0.0,
        1.0,
        False,
        "How far a link's learned weight moves its carry, for every question (times coef_weight, around "
        "neutral); 0: what agents taught a link stays with the questions that taught it (their own evidence).",
    ),
    "recency_half_life_days": (30.0, 1.0, 3650.0, False, "Days after which the recency factor halves."),
    "hop_decay": (0.6, 0.01, 1.0, False, "Hop factor base: max(hop_floor, hop_decay ** hops)."),
    "hop_floor": (0.25, 0.0, 1.0, False, "Hop factor for far or unreachable nodes."),
    "max_hops": (2, 1, 3, True, "Bound of graph expansion and of the reachability view."),
    "fanout_cap": (50, 1, 1000, True, "Per-node cap of expanded edges (top N by stored weight)."),
    # Learning.
    "learning_rate": (0.1, 0.01, 0.5, False, "Reinforcement step: w += lr * (1 - w). Typical 0.05..0.20."),
    "negative_rate": (0.1, 0.01, 0.5, False, "Negative step: w -= rate * w."),
    "ema_alpha": (0.1, 0.01, 0.5, False, "Outcome EMA: w = alpha * score + (1 - alpha) * w."),
    "outcome_accepted": (1.0, 0.0, 1.0, False, "Outcome score of an accepted session."),
    "outcome_rework": (0.5, 0.0, 1.0, False, "Outcome score of a session that needed rework."),
    "outcome_rejected": (0.0, 0.0, 1.0, False, "Outcome score of a rejected session."),
    "co_use_min_sessions": (
        3,
        1,
        1000,
        True,
        "Accepted sessions using two unlinked nodes before a co_used edge links them.",
    ),
    "implicit_threshold": (
        0.35,
        0.05,
        1.0,
        False,
        "Share of an item's distinctive n-grams found in a response to count as implicit use.",
    ),
    # Agent-written memory.
    "memory_duplicate_threshold": (
        0.95,
        0.5,
        1.0,
        False,
        "Cosine similarity at or above which a remembered text is taken as a near-duplicate of a live note "
        "of the same kind (linked to it instead of copied).",
    ),
    # Decay and ceiling.
    "decay_rate": (0.95, 0.5, 1.0, False, "Multiplier applied once per period to edges not traversed."),
    "decay_period_days": (7, 1, 365, True, "Length of a decay period in days."),
    "weight_floor": (0.1, 0.0, 0.5, False, "Decay never takes a weight below this floor."),
    # Context assembly.
    "abstain_floor": (
        0.0,
        0.0,
        1.0,
        False,
        "A context answer whose confidence (its best entry point's cosine similarity, plus a little for a strong "
        "lexical match) is below this floor abstains: no items, still logged. 0: never. Calibrate it from the "
        "graph's own sessions (manage.py calibrate_floor, or the tune page), per embedder.",
    ),
    "default_budget_items": (10, 1, 200, True, "Default context budget in items."),
    "default_budget_tokens": (2000, 16, 100000, True, "Default context budget in tokens."),
}
CEILING_MODES = ("soft", "normalize")


def _field(default, lo, hi, integer, help_text):
    if integer:
        return models.IntegerField(default=default, help_text=f"{help_text} [{lo}..{hi}]")
    return models.FloatField(default=default, help_text=f"{help_text} [{lo}..{hi}]")


def _constraints():
    checks = [
        models.CheckConstraint(condition=Q(**{f"{n}__gte": lo, f"{n}__lte": hi}), name=f"policy_{n}_range")
        for n, (_d, lo, hi, _i, _h) in POLICY_NUMBERS.items()
    ]
    checks.append(models.CheckConstraint(condition=Q(ceiling_mode__in=CEILING_MODES), name="policy_ceiling_mode_valid"))
    checks.append(models.UniqueConstraint(fields=["graph", "revision"], name="policy_revision_per_graph"))
    return checks


class PolicyRevision(models.Model):
    """One revision of a graph's policy. Revisions are never edited; a change writes a new one."""

    graph = models.ForeignKey(Graph, on_delete=models.CASCADE, related_name="policy_revisions")
    revision = models.PositiveIntegerField()
    created_at = models.DateTimeField(default=clock.now, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.CharField(max_length=500, blank=True)
    ceiling_mode = models.CharField(max_length=20, default="soft", choices=[(m, m) for m in CEILING_MODES])
    priorities = models.JSONField(
        null=True,
        blank=True,
        help_text="The graph's edge-type priorities when this revision was written: edge type id -> priority. "
        "Empty (null) for revisions written before priority sets were recorded.",
    )
    locals().update({name: _field(*spec) for name, spec in POLICY_NUMBERS.items()})

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = _constraints()
        ordering = ["graph", "-revision"]

    def __str__(self):
        return f"{self.graph} policy r{self.revision}"

    def numbers(self) -> dict:
        """Every policy value (numbers and ceiling mode) as a plain dict."""
        values = {name: getattr(self, name) for name in POLICY_NUMBERS}
        values["ceiling_mode"] = self.ceiling_mode
        return values

    def outcome_score(self, outcome: str) -> float:
        """The score an outcome word maps to (accepted, rework, rejected)."""
        return getattr(self, f"outcome_{outcome}")

    def priority_set(self) -> dict[int, float] | None:
        """The edge-type priorities recorded with this revision (edge type id -> priority), None if not recorded."""
        if self.priorities is None:
            return None
        return {int(pk): value for pk, value in self.priorities.items()}


def priority_snapshot(graph_id: int) -> dict[str, float]:
    """The graph's edge-type priorities now, as a revision records them (edge type id as text -> priority)."""
    rows = EdgeType.objects.filter(graph_id=graph_id).order_by("pk").values_list("pk", "priority")
    return {str(pk): priority for pk, priority in rows}


def priorities_to_restore(revision: PolicyRevision) -> dict[EdgeType, tuple[float, float]]:
    """What restoring ``revision`` does to the edge types' priorities: edge type -> (now, then), for the types
    that still exist and whose priority differs. Types created since (not in its set) keep theirs; a revision
    without a recorded set restores no priority."""
    recorded = revision.priority_set()
    if not recorded:
        return {}
    types = EdgeType.objects.filter(graph_id=revision.graph_id, pk__in=recorded).order_by("name")
    return {et: (et.priority, recorded[et.pk]) for et in types if et.priority != recorded[et.pk]}


def revision_changes(previous: PolicyRevision | None, revision: PolicyRevision, names: dict[int, str]) -> dict:
    """What ``revision`` changed from ``previous`` (name -> (before, after)): its numbers, then the priority of
    each edge type (``priority <name>``, ``names``: edge type id -> name) where both recorded a set."""
    if previous is None:
        return {}
    before, after = previous.numbers(), revision.numbers()
    diff = {k: (before[k], v) for k, v in after.items() if before[k] != v}
    old_set, new_set = previous.priority_set(), revision.priority_set()
    if old_set is not None and new_set is not None:
        for pk in sorted(set(old_set) & set(new_set), key=lambda pk: names.get(pk, "")):
            if old_set[pk] != new_set[pk]:
                diff[f"priority {names.get(pk, f'#{pk} (deleted)')}"] = (old_set[pk], new_set[pk])
    return diff
