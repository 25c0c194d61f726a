"""manage.py evaluate_abstention [--sets demo,conversation] [--seeds 0,1,2] [--target-recall 0.95] [--write FILE]

Abstention on the evaluation sets (feedback.harness.abstention): per set and seed, a fresh graph with the set's
vault, the floor calibrated on a held-out half of the answerable questions, then the share of off-topic and
near-domain questions that abstain, the share of the other half that keeps its items, and its recall@5 with the
floor off and on. In this process, against this database (the graphs stay, in the organization abstention-eval).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from feedback.harness.abstention import SETS, TABLE_HEAD, as_dict, evaluate_set, table_row
from feedback.harness.config import EvaluationError

START = "<!-- evaluate-abstention: start (written by manage.py evaluate_abstention; do not edit by hand) -->"
END = "<!-- evaluate-abstention: end -->"


class Command(BaseCommand):
    help = "Measure abstention on the evaluation sets: off-topic and near-domain questions against answerable ones."

    def add_arguments(self, parser):
        parser.add_argument("--sets", default=",".join(SETS), help=f"Comma-separated, of {', '.join(SETS)}.")
        parser.add_argument("--seeds", default="0", help="Comma-separated split seeds (one run per set and seed).")
        parser.add_argument("--target-recall", type=float, default=0.95, help="The calibration's target (0.5..1).")
        parser.add_argument("--json", dest="json_path", help="Write every run's figures to this JSON file.")
        parser.add_argument("--write", help="Replace the table between the evaluate-abstention markers of this file.")

    def handle(self, *args, sets, seeds, target_recall, json_path=None, write=None, **options):
        names = [n.strip() for n in sets.split(",") if n.strip()]
        unknown = [n for n in names if n not in SETS]
        if unknown or not names:
            raise CommandError(f"--sets: unknown {unknown or 'empty list'}; known: {', '.join(SETS)}.")
        try:
            seed_list = [int(s) for s in seeds.split(",") if s.strip()]
        except ValueError as exc:
            raise CommandError("--seeds: comma-separated integers.") from exc
        if not 0.5 <= target_recall <= 1:
            raise CommandError("--target-recall: between 0.5 and 1.")
        rows, results = [], []
        for name in names:
            for seed in seed_list:
                try:
                    result = evaluate_set(name, target_recall=target_recall, seed=seed, log=self.stdout.write)
                except EvaluationError as exc:
                    raise CommandError(str(exc)) from exc
                results.append({"seed": seed, **as_dict(result)})
                rows.append(table_row(result, seed))
        table = "\n".join([TABLE_HEAD, *rows])
        self.stdout.write(table)
        if json_path:
            Path(json_path).write_text(_dumps(results), encoding="utf-8")
        if write:
            _write_between_markers(Path(write), table)
            self.stdout.write(f"Table written into {write}.")


def _dumps(value) -> str:
    return json.dumps(value, indent=1) + "\n"


def _write_between_markers(path: Path, table: str) -> None:
    text = path.read_text(encoding="utf-8")
    if START not in text or END not in text:
        raise CommandError(f"{path}: the markers {START!r} and {END!r} are missing.")
    head, rest = text.split(START, 1)
    _old, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{table}\n{END}{tail}", encoding="utf-8")
