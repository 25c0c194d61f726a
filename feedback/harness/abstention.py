"""Does a context answer say "nothing relevant" when it should, and only then? The abstention evaluation.

``evaluate_set`` (``manage.py evaluate_abstention``) imports an evaluation set's vault into a fresh graph and
asks every question through the real context API in this process (``inprocess.api_client``: the real views,
the real pipeline), a fresh session per question, reporting nothing (the graph learns nothing in between):

1. The answerable questions are split in two halves with the seed (``evaluation.split``). A fresh import has no
   logged sessions, so the floor is calibrated on the *calibration half*: the confidences of its answers
   that gave a useful note in the top 5 (what an agent would have used) are the positives, and the floor is
   the highest that keeps ``target_recall`` of answers like them with 90% assurance
   (``feedback.rules.floor_at_recall``, what ``manage.py calibrate_floor`` applies to a graph's logged
   sessions). No unanswerable question is used.
2. With the floor at 0 (the default: never abstain), the *evaluation half* is asked: recall@5 and hit@5.
3. The floor is written into the graph's policy (``do_set_policy``, audited) and the evaluation half and
   the unanswerable questions (``demo/unanswerable/*.json``: off-topic and near-domain) are asked again.

It reports the share of off-topic and of near-domain questions that abstain, the share of the evaluation
half that keeps its items, recall@5 and hit@5 of the evaluation half with the floor off and on (an answer
that abstains scores 0), and recall@5 of the questions answered with the floor on, off and on (the gate
takes a whole answer or leaves it as it was). Nothing here reads the unanswerable questions before the floor is set.
"""

from __future__ import annotations

import json
import statistics
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model

from graphadmin import actions as core_actions
from graphadmin.models import Graph, Membership, Organization
from graphadmin.vault.parse import parse_vault

from ..imports import do_import_vault
from ..rules import floor_at_recall
from .config import EvaluationError, Question, load_questions
from .evaluation import split
from .inprocess import api_client, post
from .scoring import mean, ranked_keys, score

ROOT = settings.BASE_DIR
SETS = {
    "demo": ("demo/vault", "demo/questions.json", "demo/unanswerable/harbor.json"),
    "conversation": (
        "demo/conversation/vault",
        "demo/conversation/questions.json",
        "demo/unanswerable/conversation.json",
    ),
}
KINDS = ("off_topic", "near_domain")
ORG = "abstention-eval"
ACTOR = "command:evaluate_abstention"
Log = Callable[[str], None]


@dataclass
class SetResult:
    """One set's figures (shares in 0..1; recall and hit over the evaluation half, abstained answers scoring 0)."""

    name: str
    graph: int
    target_recall: float
    calibrated_on: str
    positives: int
    floor: float
    evaluation_questions: int
    kept: float
    recall5_off: float
    recall5_on: float
    hit5_off: float
    hit5_on: float
    recall5_answered_off: float
    recall5_answered_on: float
    off_topic: int
    off_topic_abstained: float
    near_domain: int
    near_domain_abstained: float
    confidence_answerable_median: float
    confidence_off_topic_median: float
    confidence_near_domain_median: float


def load_unanswerable(path: str | Path) -> list[tuple[str, str]]:
    """``{"questions": [{"q": "...", "kind": "off_topic" | "near_domain"}, ...]}`` as (question, kind) pairs."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        out = [(item["q"].strip(), item["kind"]) for item in data["questions"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise EvaluationError(f"{path}: cannot read the unanswerable questions ({exc}).") from exc
    if not out or any(kind not in KINDS or not q for q, kind in out):
        raise EvaluationError(f"{path}: every question needs a non-empty 'q' and a 'kind' in {KINDS}.")
    return out


def _ask(client, graph_id: int, query: str) -> dict:
    body = {"session": f"abstain-{uuid.uuid4().hex[:12]}", "query": query, "budget_unit": "items", "budget": 5}
    return post(client, f"/api/graphs/{graph_id}/context/", body, "context", (201,)).json()


def _graph(name: str, run: str, log: Log):
    """A fresh graph in the evaluation organization with the set's vault imported (vectors written), and an
    admin of that organization to ask as."""
    org, _ = Organization.objects.get_or_create(slug=ORG, defaults={"name": "Abstention evaluation"})
    user, _ = get_user_model().objects.get_or_create(username="abstention-eval")
    Membership.objects.update_or_create(user=user, organization=org, defaults={"role": "admin"})
    graph = core_actions.do_create_graph(org, f"{name}-{run}", f"abstention {name} {run}", actor=user)
    vault = ROOT / SETS[name][0]
    result = do_import_vault(graph, parse_vault(vault), actor=ACTOR, embed="sync")
    log(f"{name}: imported {vault} into graph {graph.pk} ({result.counts.get('nodes_created', 0)} notes)")
    return Graph.objects.get(pk=graph.pk), user


def evaluate_set(name: str, *, target_recall: float = 0.95, seed: int = 0, log: Log = print) -> SetResult:
    """Calibrate on one half of the set's answerable questions, then measure abstention on the other half and on
    its unanswerable questions (module docstring)."""
    _vault, answerable_path, unanswerable_path = SETS[name]
    answerable: list[Question] = load_questions(ROOT / answerable_path)
    unanswerable = load_unanswerable(ROOT / unanswerable_path)
    graph, user = _graph(name, uuid.uuid4().hex[:6], log)
    client = api_client(user)
    calibration_half, evaluation_half = split(len(answerable), 0.5, seed)

    positives, confidences = [], []
    for i in calibration_half:
        q = answerable[i]
        answer = _ask(client, graph.pk, q.q)
        confidences.append(answer["confidence"])
        if score(ranked_keys(answer["items"]), q.useful)["hit5"]:
            positives.append(answer["confidence"])
    calibration = floor_at_recall(positives, [], target_recall)
    log(f"{name}: floor {calibration.floor} from {len(positives)} useful answers of the calibration half")

    off = [_ask(client, graph.pk, answerable[i].q) for i in evaluation_half]
    core_actions.do_set_policy(
        graph, {"abstain_floor": calibration.floor}, actor=ACTOR, note=f"evaluate_abstention (seed {seed})"
    )
    on = [_ask(client, graph.pk, answerable[i].q) for i in evaluation_half]
    asked = {kind: [_ask(client, graph.pk, q) for q, k in unanswerable if k == kind] for kind in KINDS}

    def scored(answers, metric, only=None):
        useful = [answerable[i].useful for i in evaluation_half]
        rows = [(a, u) for j, (a, u) in enumerate(zip(answers, useful, strict=True)) if only is None or j in only]
        return round(mean(score(ranked_keys(a["items"]), u)[metric] for a, u in rows), 4)

    answered = {j for j, a in enumerate(on) if not a["abstained"]}

    def abstained(answers):
        return round(mean(1.0 if a["abstained"] else 0.0 for a in answers), 4)

    def median(answers):
        return round(statistics.median(a["confidence"] for a in answers), 4) if answers else 0.0

    return SetResult(
        name=name,
        graph=graph.pk,
        target_recall=target_recall,
        calibrated_on=f"held-out half of the answerable questions ({len(calibration_half)}, seed {seed})",
        positives=len(positives),
        floor=calibration.floor,
        evaluation_questions=len(evaluation_half),
        kept=round(1 - abstained(on), 4),
        recall5_off=scored(off, "recall5"),
        recall5_on=scored(on, "recall5"),
        hit5_off=scored(off, "hit5"),
        hit5_on=scored(on, "hit5"),
        recall5_answered_off=scored(off, "recall5", answered),
        recall5_answered_on=scored(on, "recall5", answered),
        off_topic=len(asked["off_topic"]),
        off_topic_abstained=abstained(asked["off_topic"]),
        near_domain=len(asked["near_domain"]),
        near_domain_abstained=abstained(asked["near_domain"]),
        confidence_answerable_median=median(off),
        confidence_off_topic_median=median(asked["off_topic"]),
        confidence_near_domain_median=median(asked["near_domain"]),
    )


TABLE_HEAD = (
    "| Set | Seed | Floor (calibrated on) | Off-topic abstain (target >= 90%) | Near-domain abstain "
    "| Answerable keep items (target >= 95%) | recall@5 all off -> on | hit@5 all off -> on "
    "| recall@5 answered off -> on (target: within 0.5 pt) |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def table_row(r: SetResult, seed: int) -> str:
    """One markdown row of the abstention table."""
    pct = lambda x: f"{100 * x:.1f}%"  # noqa: E731
    return (
        f"| {r.name} | {seed} | {r.floor} ({r.positives} useful of {r.calibrated_on.split(' (')[1].split(',')[0]} "
        f"held-out) | {pct(r.off_topic_abstained)} of {r.off_topic} | {pct(r.near_domain_abstained)} of "
        f"{r.near_domain} | {pct(r.kept)} of {r.evaluation_questions} | {100 * r.recall5_off:.1f} -> "
        f"{100 * r.recall5_on:.1f} | {100 * r.hit5_off:.1f} -> {100 * r.hit5_on:.1f} | "
        f"{100 * r.recall5_answered_off:.1f} -> {100 * r.recall5_answered_on:.1f} |"
    )


def as_dict(r: SetResult) -> dict:
    """The figures as plain values (the command's --json)."""
    return asdict(r)
