"""manage.py evaluate_all --url URL --token TOKEN [...]: every set x feedback mode x seed, one markdown table.

Runs ``feedback.harness.evaluation.evaluate`` (what ``evaluate_learning`` runs) for each combination against a
running server, over HTTP only, keeps each run's JSON report in ``--out-dir`` (a run whose JSON is
there is not run again: an interrupted sweep resumes), and writes the summary table and every run's
per-round table into ``--write`` (docs/learning.md) between two markers. ``make evaluate-all``.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import fields
from pathlib import Path

import httpx
from django.core.management.base import BaseCommand, CommandError

from feedback.harness.config import EvaluationConfig, EvaluationError, load_questions
from feedback.harness.evaluation import evaluate
from feedback.harness.report import MARKDOWN_HEAD, EvaluationReport
from feedback.harness.scoring import mean
from graphadmin.agents.client import ApiError, GraphClient, ServerError

SETS = {
    "demo": ("demo/vault", "demo/questions.json"),
    "conversation": ("demo/conversation/vault", "demo/conversation/questions.json"),
}
# mode name -> (feedback, report_p)
MODES = {
    "full": ("explicit", 1.0),
    "p0.5": ("explicit", 0.5),
    "response": ("response", 1.0),
    "outcome": ("outcome", 1.0),
}
START = "<!-- evaluate-all: start (written by manage.py evaluate_all; do not edit by hand) -->"
END = "<!-- evaluate-all: end -->"


def _names(raw: str, known: dict, what: str) -> list[str]:
    names = [n.strip() for n in raw.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise CommandError(f"--{what}: unknown {unknown or 'empty list'}; known: {', '.join(known)}.")
    return names


def load_report(path: Path) -> EvaluationReport:
    """A run's report again from its JSON (the ``--json`` file of evaluate_learning or this command's)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    names = {f.name for f in fields(EvaluationReport)}
    return EvaluationReport(**{k: v for k, v in data.items() if k in names})


def _mean_row(label: str, reports: list[EvaluationReport]) -> str:
    """The mean over seeds of one set and mode, as a markdown row in MARKDOWN_HEAD's columns."""

    base = [r.baseline() for r in reports]
    targets = [r.targets() for r in reports]
    last = [r.final() for r in reports]
    cells = [
        label,
        f"{mean([b['plain']['train'] for b in base]):.3f} / {mean([b['plain']['test'] for b in base]):.3f}",
        f"{mean([b['train'] for b in base]):.3f} / {mean([b['test'] for b in base]):.3f}",
        f"{mean([x['learning']['train']['recall5'] for x in last]):.3f} / "
        f"{mean([x['learning']['test']['recall5'] for x in last]):.3f}",
        f"{mean([x['frozen']['train']['recall5'] for x in last]):.3f} / "
        f"{mean([x['frozen']['test']['recall5'] for x in last]):.3f}",
        f"{mean([t['train_vs_base'] for t in targets]) * 100:+.1f} / "
        f"{mean([t['test_vs_base'] for t in targets]) * 100:+.1f}",
        f"{mean([t['twin_drift_train'] for t in targets]) * 100:+.1f} / "
        f"{mean([t['twin_drift_test'] for t in targets]) * 100:+.1f}",
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(runs: list[tuple[str, str, int, EvaluationReport, float]], command: str) -> str:
    """The block written into docs/learning.md: per set, a row per mode and seed, the mean over seeds; then
    every run's per-round table."""
    out = [START, "", f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", ""]
    total = sum(r[4] for r in runs)
    out.append(
        f"{len(runs)} runs, {total / 60:.0f} minutes of runs in all (the sum of each run's own time, "
        "import and embedding included). Recall@5, question only; plain cosine = the node-vector top 5 "
        "alone (search hits ordered by `vector_score`); base = round 0, frozen; drift = the frozen twin's "
        "last round against base."
    )
    for set_name in dict.fromkeys(r[0] for r in runs):
        rows = [r for r in runs if r[0] == set_name]
        first = rows[0][3]
        out += [
            "",
            f"#### {set_name}: {SETS.get(set_name, ('?', '?'))[0]}, {len(first.questions)} questions, "
            f"{first.config.get('rounds')} rounds",
            "",
            MARKDOWN_HEAD,
        ]
        for mode in dict.fromkeys(r[1] for r in rows):
            of_mode = [r for r in rows if r[1] == mode]
            for _, _, seed, report, seconds in of_mode:
                out.append(report.markdown_row(f"{mode}, seed {seed} ({seconds / 60:.1f} min)"))
            if len(of_mode) > 1:
                out.append(_mean_row(f"**{mode}, mean of {len(of_mode)} seeds**", [r[3] for r in of_mode]))
    out += ["", "<details><summary>Every run, per round</summary>", ""]
    for set_name, mode, seed, report, _ in runs:
        out += [f"{set_name}, {mode}, seed {seed}:", "", "```", report.table(), "```", ""]
    out += ["</details>", "", END]
    return "\n".join(out)


def write_block(path: Path, block: str) -> None:
    """Replace the block between the markers in ``path`` (or append it)."""
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if START in text and END in text:
        head, _, rest = text.partition(START)
        _, _, tail = rest.partition(END)
        text = head + block + tail
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    path.write_text(text, encoding="utf-8")


class Command(BaseCommand):
    help = "Run evaluate_learning for every set x feedback mode x seed and write one markdown table."

    def add_arguments(self, parser):
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--token", default=os.environ.get("GRAPHADMIN_TOKEN", ""))
        parser.add_argument("--org", required=True)
        parser.add_argument("--sets", default=",".join(SETS), help="Comma-separated, of: " + ", ".join(SETS))
        parser.add_argument("--modes", default=",".join(MODES), help="Comma-separated, of: " + ", ".join(MODES))
        parser.add_argument("--seeds", default="0,1,2", help="Comma-separated split seeds (default 0,1,2).")
        parser.add_argument("--rounds", type=int, default=5)
        parser.add_argument("--out-dir", default=".local/evaluate-all", help="Each run's JSON report.")
        parser.add_argument("--write", help="The markdown file to write the block into (e.g. docs/learning.md).")
        parser.add_argument("--only-write", action="store_true", help="Run nothing: rebuild the block from the JSONs.")
        parser.add_argument("--timeout", type=float, default=120.0)

    def handle(self, *args, **o):
        logging.getLogger("httpx").setLevel(logging.WARNING)
        sets, modes = _names(o["sets"], SETS, "sets"), _names(o["modes"], MODES, "modes")
        try:
            seeds = [int(s) for s in o["seeds"].split(",") if s.strip()]
        except ValueError as exc:
            raise CommandError(f"--seeds: {exc}") from exc
        out_dir = Path(o["out_dir"])
        out_dir.mkdir(parents=True, exist_ok=True)
        if not o["token"] and not o["only_write"]:
            raise CommandError("--token is required (or GRAPHADMIN_TOKEN).")
        runs = []
        for set_name in sets:
            vault, questions_path = SETS[set_name]
            questions = load_questions(questions_path)
            for mode in modes:
                feedback, report_p = MODES[mode]
                for seed in seeds:
                    path = out_dir / f"{set_name}-{mode}-s{seed}-r{o['rounds']}.json"
                    if path.exists():
                        data = json.loads(path.read_text(encoding="utf-8"))
                        runs.append((set_name, mode, seed, load_report(path), data.get("seconds", 0.0)))
                        self.stderr.write(f"{path}: kept (delete it to run again)")
                        continue
                    if o["only_write"]:
                        continue
                    cfg = EvaluationConfig(
                        organization=o["org"], rounds=o["rounds"], seed=seed, feedback=feedback, report_p=report_p
                    )
                    self.stderr.write(f"== {set_name}, {mode}, seed {seed}")
                    started = time.monotonic()
                    try:
                        with GraphClient(o["url"], o["token"], timeout=o["timeout"], retries=3) as client:
                            report = evaluate(client, vault, questions, cfg, log=lambda line: self.stderr.write(line))
                    except EvaluationError as exc:
                        raise CommandError(str(exc)) from exc
                    except (ApiError, ServerError, httpx.HTTPError) as exc:
                        raise CommandError(f"{o['url']}: {exc}") from exc
                    seconds = round(time.monotonic() - started, 1)
                    path.write_text(
                        json.dumps({**report.as_dict(), "targets": report.targets(), "seconds": seconds}, indent=1),
                        encoding="utf-8",
                    )
                    self.stdout.write(f"{set_name}, {mode}, seed {seed} ({seconds:.0f}s):\n{report.table()}\n")
                    runs.append((set_name, mode, seed, report, seconds))
        if not runs:
            raise CommandError(f"no run to report (nothing in {out_dir}).")
        command = f"manage.py evaluate_all --sets {','.join(sets)} --modes {','.join(modes)} --seeds " + ",".join(
            map(str, seeds)
        )
        block = markdown(runs, command)
        if o["write"]:
            write_block(Path(o["write"]), block)
            self.stdout.write(f"wrote {o['write']}")
        else:
            self.stdout.write(block)
