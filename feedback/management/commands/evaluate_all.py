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

from feedback.harness import locomo
from feedback.harness.config import EvaluationConfig, EvaluationError, load_questions
from feedback.harness.evaluation import evaluate
from feedback.harness.plots import write_learning_curves
from feedback.harness.report import (
    MARKDOWN_HEAD,
    EvaluationReport,
    ablation_means,
    fmt_pair,
    frozen0_table,
    run_figures,
)
from graphadmin_client import ApiError, GraphClient, ServerError

SETS = {
    "demo": ("demo/vault", "demo/questions.json"),
    "conversation": ("demo/conversation/vault", "demo/conversation/questions.json"),
}
# LoCoMo's development conversations, converted at run time under .local/locomo/ (feedback.harness.locomo):
# ``locomo:26`` one of them, ``locomo:dev`` all eight. The reserved ones are refused here and by the converter.
LOCOMO = "locomo:"
LOCOMO_DEV = "locomo:dev"
PLOT = "docs/learning-curves.png"
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


def parse_sets(raw: str) -> list[str]:
    """``--sets``: names of ``SETS``, ``locomo:<id>`` of a development conversation, or ``locomo:dev`` (all
    eight); each once, in the order given. Anything else, a reserved conversation included, is refused."""
    names: list[str] = []
    for name in (n.strip() for n in raw.split(",")):
        if not name:
            continue
        if name == LOCOMO_DEV:
            names += [LOCOMO + c for c in locomo.DEV_CONVERSATIONS]
        elif name.startswith(LOCOMO):
            conversation = name[len(LOCOMO) :]
            if conversation not in locomo.DEV_CONVERSATIONS:
                raise CommandError(
                    f"--sets: {name} is not a development conversation (use locomo:dev or one of "
                    f"{', '.join(LOCOMO + c for c in locomo.DEV_CONVERSATIONS)}; "
                    "the others are reserved for acceptance)."
                )
            names.append(name)
        elif name in SETS:
            names.append(name)
        else:
            raise CommandError(
                f"--sets: unknown {name!r}; known: {', '.join(SETS)}, {LOCOMO_DEV}, "
                f"{LOCOMO}<id> with id one of {', '.join(locomo.DEV_CONVERSATIONS)}."
            )
    if not names:
        raise CommandError("--sets: empty list.")
    return list(dict.fromkeys(names))


def set_files(name: str, archive: str = locomo.DEFAULT_ARCHIVE, out: str = locomo.DEFAULT_OUT) -> tuple[str, str]:
    """The vault and questions file of a set; a LoCoMo set is converted now (``locomo.convert``) under ``out``."""
    if name.startswith(LOCOMO):
        try:
            converted = locomo.convert(name[len(LOCOMO) :], archive, out)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        return str(converted.vault), str(converted.questions)
    return SETS[name]


def run_file(
    out_dir: Path, set_name: str, mode: str, seed: int, rounds: int, limit: int | None, budget: int | None = None
) -> Path:
    """Where a run's JSON is kept: one file per set, mode, seed, rounds (and question limit and budget)."""
    stem = f"{set_name.replace(':', '-')}-{mode}-s{seed}-r{rounds}" + (f"-q{limit}" if limit else "")
    stem += f"-b{budget}" if budget else ""
    return out_dir / f"{stem}.json"


def load_report(path: Path) -> EvaluationReport:
    """A run's report again from its JSON (the ``--json`` file of evaluate_learning or this command's)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    names = {f.name for f in fields(EvaluationReport)}
    return EvaluationReport(**{k: v for k, v in data.items() if k in names})


def _mean_row(label: str, reports: list[EvaluationReport]) -> str:
    """The mean over seeds of one set and mode (each figure the mean of the runs'), as a row of MARKDOWN_HEAD."""

    figures = [run_figures(r.questions) for r in reports]

    def m(side, key):
        got = [f[side][key] for f in figures if f[side][key] is not None]
        return sum(got) / len(got) if got else None

    cells = [
        label,
        f"{figures[0]['train']['n']} / {figures[0]['test']['n']}",
        *(fmt_pair(m("train", k), m("test", k)) for k in ("plain", "hybrid", "base", "learning", "frozen")),
        fmt_pair(m("train", "learning_vs_base"), m("test", "learning_vs_base"), points=True),
        fmt_pair(m("train", "drift"), m("test", "drift"), points=True),
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(runs: list[tuple[str, str, int, EvaluationReport, float]], command: str, plot: str | None = None) -> str:
    """The block written into docs/learning.md: per set, the frozen twin at round 0 (baselines, the ablation,
    items through an edge, per question category with intervals), then a row per mode and seed with one row per
    category under it and the mean over seeds; the ablation's mean over the sets; the learning-curve figure;
    then every run's per-round table."""
    out = [START, "", f"Written by `{command}` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}.", ""]
    total = sum(r[4] for r in runs)
    out.append(
        f"{len(runs)} runs, {total / 60:.0f} minutes of runs in all (the sum of each run's own time, "
        "import and embedding included). Recall@5, question only; plain cosine = the node-vector top 5 "
        "alone (search hits ordered by `vector_score`); cosine + BM25 = the plain hybrid (reciprocal-rank "
        "fusion, k = 60, of the hits' `vector_score` and `bm25` rankings); base = round 0, frozen; drift = "
        "the frozen twin's last round against base; hops 0 = the frozen twin at round 0 asked with `hops: 0` "
        "(entry points only). Intervals: 95% bootstrap over questions (2,000 resamples, seeded; paired for "
        "differences)."
    )
    summaries: dict[str, dict] = {}
    for set_name in dict.fromkeys(r[0] for r in runs):
        rows = [r for r in runs if r[0] == set_name]
        first = rows[0][3]
        summary = first.summary()
        summaries[set_name] = summary
        out += [
            "",
            f"#### {set_name}: {len(first.questions)} questions, {first.config.get('rounds')} rounds",
            "",
            f"The frozen twin at round 0 (from {rows[0][1]}, seed {rows[0][2]}; it has had no feedback, so every "
            "run of the set gives the same figures):",
            "",
            frozen0_table(summary),
            "",
            MARKDOWN_HEAD,
        ]
        for mode in dict.fromkeys(r[1] for r in rows):
            of_mode = [r for r in rows if r[1] == mode]
            for _, _, seed, report, seconds in of_mode:
                out.append(report.markdown_row(f"{mode}, seed {seed} ({seconds / 60:.1f} min)"))
                groups = report.groups()
                if len(groups) > 1:
                    for category, qs in groups.items():
                        if category != "all":
                            out.append(report.markdown_row(f"&nbsp;&nbsp;{category}", qs))
            if len(of_mode) > 1:
                out.append(_mean_row(f"**{mode}, mean of {len(of_mode)} seeds**", [r[3] for r in of_mode]))
    if len(summaries) > 1:
        out += [
            "",
            f"#### The ablation over {len(summaries)} sets ({', '.join(summaries)}): each set's mean, then their mean",
            "",
            ablation_means(summaries),
        ]
    if plot:
        out += ["", f"![Learning curves: train and test recall@5 per round, every mode]({Path(plot).name})"]
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
        parser.add_argument(
            "--sets",
            default=",".join(SETS),
            help=f"Comma-separated, of: {', '.join(SETS)}, {LOCOMO_DEV} (the eight LoCoMo development conversations) "
            f"or {LOCOMO}<id> (one of {', '.join(locomo.DEV_CONVERSATIONS)}; converted at run time).",
        )
        parser.add_argument("--modes", default=",".join(MODES), help="Comma-separated, of: " + ", ".join(MODES))
        parser.add_argument("--seeds", default="0,1,2", help="Comma-separated split seeds (default 0,1,2).")
        parser.add_argument("--rounds", type=int, default=5)
        parser.add_argument("--out-dir", default=".local/evaluate-all", help="Each run's JSON report.")
        parser.add_argument("--write", help="The markdown file to write the block into (e.g. docs/learning.md).")
        parser.add_argument("--only-write", action="store_true", help="Run nothing: rebuild the block from the JSONs.")
        parser.add_argument("--timeout", type=float, default=120.0)
        parser.add_argument(
            "--questions-limit",
            type=int,
            default=None,
            help="Only the first N questions of each set (a fast run while developing; kept in a file of its own).",
        )
        parser.add_argument(
            "--budget",
            type=int,
            default=None,
            help="Context budget in items (default: the graph policy's); the acceptance runs of LoCoMo use 5.",
        )
        parser.add_argument("--locomo-archive", default=locomo.DEFAULT_ARCHIVE, help="LoCoMo's locomo10.zip.")
        parser.add_argument(
            "--plot", default=None, help=f"The learning-curve figure (PNG); default with --write: {PLOT}."
        )

    def handle(self, *args, **o):
        logging.getLogger("httpx").setLevel(logging.WARNING)
        sets, modes = parse_sets(o["sets"]), _names(o["modes"], MODES, "modes")
        limit = o["questions_limit"]
        if limit is not None and limit < 2:
            raise CommandError("--questions-limit must be 2 or more (a train and a test question).")
        if o["budget"] is not None and o["budget"] < 1:
            raise CommandError("--budget must be 1 or more.")
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
            todo = [
                run_file(out_dir, set_name, m, seed, o["rounds"], limit, o["budget"]) for m in modes for seed in seeds
            ]
            if o["only_write"] or all(p.exists() for p in todo):
                vault, questions = None, []  # nothing to run: the set is not converted again
            else:
                vault, questions_path = set_files(set_name, o["locomo_archive"])
                try:
                    questions = load_questions(questions_path)[:limit]
                except EvaluationError as exc:
                    raise CommandError(str(exc)) from exc
            for mode in modes:
                feedback, report_p = MODES[mode]
                for seed in seeds:
                    path = run_file(out_dir, set_name, mode, seed, o["rounds"], limit, o["budget"])
                    if path.exists():
                        data = json.loads(path.read_text(encoding="utf-8"))
                        runs.append((set_name, mode, seed, load_report(path), data.get("seconds", 0.0)))
                        self.stderr.write(f"{path}: kept (delete it to run again)")
                        continue
                    if o["only_write"]:
                        continue
                    cfg = EvaluationConfig(
                        organization=o["org"],
                        rounds=o["rounds"],
                        seed=seed,
                        feedback=feedback,
                        report_p=report_p,
                        budget=o["budget"],
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
                    data = {**report.as_dict(), "targets": report.targets(), "summary": report.summary()}
                    path.write_text(json.dumps({**data, "seconds": seconds}, indent=1), encoding="utf-8")
                    self.stdout.write(f"{set_name}, {mode}, seed {seed} ({seconds:.0f}s):\n{report.table()}\n")
                    runs.append((set_name, mode, seed, report, seconds))
        if not runs:
            raise CommandError(f"no run to report (nothing in {out_dir}).")
        command = f"manage.py evaluate_all --sets {o['sets']} --modes {','.join(modes)} --seeds " + ",".join(
            map(str, seeds)
        )
        command += f" --rounds {o['rounds']}" + (f" --questions-limit {limit}" if limit else "")
        command += f" --budget {o['budget']}" if o["budget"] else ""
        plot = o["plot"] or (PLOT if o["write"] else None)
        if plot:
            write_learning_curves([(r[0], r[1], r[3]) for r in runs], plot)
            self.stdout.write(f"wrote {plot}")
        block = markdown(runs, command, plot)
        if o["write"]:
            write_block(Path(o["write"]), block)
            self.stdout.write(f"wrote {o['write']}")
        else:
            self.stdout.write(block)
