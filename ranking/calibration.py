"""The abstention floor calibrated from a graph's own logged answers (``manage.py calibrate_floor``, the tune page).

Every context answer logs its confidence (ranking.context, in the injection's parameters). Answers that
helped are the positives: some of their items were used (explicit or implicit use events, of the injection
or of its session unattributed) or their session was accepted. Answers that did not are the negatives:
their session was rejected and nothing of it was used. The floor is the highest that keeps the target share
of the positives with ASSURANCE (``feedback.rules.floor_at_recall``: a lower tolerance bound, so that a few
dozen answers do not give a floor that misses the target half the time); the negatives only say how many it
would have turned away. Per embedder: only answers whose query vector came from the configured model count
(a caller's own vectors, or another model's, are not on the same scale). Only answers given while no floor was on count:
under a floor, the answers below it abstained and could not be used, so the useful ones that remain are all
above it and a floor calibrated on them would only ever rise (set ``abstain_floor`` to 0 for a while to
collect answers again, e.g. after a change of embedder). Reads here; the one write is ``do_calibrate_floor``,
through the core's ``do_set_policy`` (a new, audited policy revision).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.db.models import Exists, OuterRef, Q

from feedback.models import ContextInjection, UseEvent
from feedback.rules import FloorCalibration, floor_at_recall
from graphadmin import actions
from graphadmin.embeddings import configured_model
from graphadmin.errors import InputError
from graphadmin.models import Graph, PolicyRevision

from .whatif import USED_SIGNALS

DEFAULT_TARGET_RECALL = 0.95
ASSURANCE = 0.9  # the probability that the floor keeps the target share of future useful answers
MIN_POSITIVES = 20  # fewer answers that helped than this and the floor would be a guess: refused
MAX_SAMPLES = 5000  # the newest answers read (bounded work; the floor follows the graph as it changes)


@dataclass(frozen=True)
class Samples:
    """The confidences of the logged answers that helped (positives) and of those that did not (negatives)."""

    model: str
    positives: list[float]
    negatives: list[float]


def samples(graph: Graph, model: str | None = None) -> Samples:
    """The newest MAX_SAMPLES logged answers of ``graph`` with a confidence, given while no floor was on and asked
    with ``model``'s query vectors (default: the configured embedder), split into positives and negatives;
    unlabelled answers (no use, session open, rework, or rejected with a use) are left out."""
    model = configured_model() if model is None else model
    used = UseEvent.objects.filter(
        graph_id=graph.pk, session_id=OuterRef("session_id"), signal__in=USED_SIGNALS
    ).filter(Q(injection_id=OuterRef("pk")) | Q(injection_id__isnull=True))
    used_in_session = UseEvent.objects.filter(
        graph_id=graph.pk, session_id=OuterRef("session_id"), signal__in=USED_SIGNALS
    )
    rows = (
        ContextInjection.objects.filter(
            graph_id=graph.pk, query_model=model, params__has_key="confidence", params__abstain_floor=0
        )
        .annotate(used=Exists(used), session_used=Exists(used_in_session))
        .order_by("-created_at", "-id")
        .values_list("params__confidence", "used", "session_used", "session__outcome")[:MAX_SAMPLES]
    )
    positives, negatives = [], []
    for confidence, was_used, session_used, outcome in rows:
        if confidence is None:
            continue
        if was_used or outcome == "accepted":
            positives.append(float(confidence))
        elif outcome == "rejected" and not session_used:
            negatives.append(float(confidence))
    return Samples(model, positives, negatives)


def calibrate(graph: Graph, target_recall: float = DEFAULT_TARGET_RECALL) -> tuple[Samples, FloorCalibration]:
    """The floor ``graph``'s logged answers give at ``target_recall`` (reads only). InputError naming
    ``target_recall`` outside 0.5..1, or naming ``sessions`` with fewer than MIN_POSITIVES answers that helped."""
    if not isinstance(target_recall, int | float) or not 0.5 <= target_recall <= 1.0:
        raise InputError({"target_recall": ["A share between 0.5 and 1.0 (e.g. 0.95)."]})
    found = samples(graph)
    if len(found.positives) < MIN_POSITIVES:
        raise InputError(
            {
                "sessions": [
                    f"Only {len(found.positives)} logged answer(s) of this graph given with the embedder "
                    f"{found.model!r} while no floor was on were used or accepted; at least {MIN_POSITIVES} "
                    "are needed to calibrate the floor."
                ]
            }
        )
    return found, floor_at_recall(found.positives, found.negatives, float(target_recall), ASSURANCE)


@transaction.atomic
def do_calibrate_floor(
    graph: Graph, *, actor, target_recall: float = DEFAULT_TARGET_RECALL
) -> tuple[PolicyRevision | None, FloorCalibration]:
    """Calibrate ``graph``'s abstention floor and write it as a new policy revision (``do_set_policy``, audited as
    policy.update with a note giving the target, the counts and the model). Returns (the new revision, or None
    when the floor is already that value, and the calibration)."""
    found, result = calibrate(graph, target_recall)
    if graph.current_policy().abstain_floor == result.floor:
        return None, result
    note = (
        f"calibrate_floor: {result.floor} keeps {result.recall:.1%} of {result.positives} answers that helped "
        f"(target {result.target_recall:.0%}), model {found.model}"
    )
    if result.abstained_negatives is not None:
        note += f"; {result.abstained_negatives:.1%} of {result.negatives} rejected answers would abstain"
    revision = actions.do_set_policy(graph, {"abstain_floor": result.floor}, actor=actor, note=note[:500])
    return revision, result
