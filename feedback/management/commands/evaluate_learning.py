"""manage.py evaluate_learning VAULT QUESTIONS --url URL --token TOKEN [...]: learning vs frozen, on the agent's path.

Talks to a running server over HTTP only (``graphadmin_client``); starts nothing and writes nothing
to the database itself. See ``feedback/harness/evaluation.py`` for what it does and docs/learning.md for how
to run it (``make evaluate`` with ``make run`` running).
"""

from __future__ import annotations

import json
import logging
import os

import httpx
from django.core.management.base import BaseCommand, CommandError

from feedback.harness.config import FEEDBACK_MODES, EvaluationConfig, EvaluationError, load_questions, parse_settings
from feedback.harness.evaluation import evaluate
from feedback.harness.plots import write_evaluation_plot
from graphadmin_client import ApiError, GraphClient, ServerError


class Command(BaseCommand):
    help = (
        "Import a vault into a learning graph and its frozen twin on a running server, ask the questions over "
        "rounds of simulated agent feedback, and print hit@5, recall@5 and MRR@5 per round."
    )

    def add_arguments(self, parser):
        parser.add_argument("vault", help="The Obsidian vault: a folder (zipped in memory) or a .zip.")
        parser.add_argument("questions", help='JSON: {"questions": [{"q": "...", "useful": ["note key", ...]}]}.')
        parser.add_argument("--url", default="http://127.0.0.1:8000", help="The running server (default %(default)s).")
        parser.add_argument(
            "--token",
            default=os.environ.get("GRAPHADMIN_TOKEN", ""),
            help="API token of a user with the admin role in the organization (default: $GRAPHADMIN_TOKEN).",
        )
        parser.add_argument(
            "--org", help="Organization slug for the two graphs (default: the only one the token's user sees)."
        )
        parser.add_argument(
            "--rounds", type=int, default=5, help="Feedback rounds; round 0 is measured before any (default 5)."
        )
        parser.add_argument(
            "--train-fraction", type=float, default=0.5, help="Share of questions whose sessions report feedback."
        )
        parser.add_argument(
            "--seed", type=int, default=0, help="Seed of the train/test split and of the agent's negative flags."
        )
        parser.add_argument("--budget", type=int, default=None, help="Context budget in items (default: the policy's).")
        parser.add_argument(
            "--negative-rate",
            type=float,
            default=0.3,
            help="Probability that a session flags one given, non-useful note as wrong (default 0.3).",
        )
        parser.add_argument(
            "--report-p",
            type=float,
            default=1.0,
            help="Explicit feedback: each used note is reported with this probability (default 1).",
        )
        parser.add_argument(
            "--feedback",
            choices=FEEDBACK_MODES,
            default="explicit",
            help="What the agent sends: explicit (uses, flags, outcome), response (an answer built from a sentence "
            "of each useful note it was given, and the outcome) or outcome (alone). Default explicit.",
        )
        parser.add_argument(
            "--set",
            dest="policy_set",
            action="append",
            default=[],
            metavar="NAME=VALUE",
            help="A policy change for both graphs, e.g. --set learning_rate=0.2 (repeatable).",
        )
        parser.add_argument(
            "--wait-timeout",
            type=float,
            default=300.0,
            help="Seconds to wait for the worker to apply a round's reports or an import's embeddings.",
        )
        parser.add_argument("--timeout", type=float, default=120.0, help="Seconds per HTTP request.")
        parser.add_argument("--json", dest="json_out", help="Write the full report (per round and per question) here.")
        parser.add_argument("--plot", help="Write a PNG of recall@5 per round here (needs matplotlib).")

    def handle(self, *args, **o):
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one INFO line per request otherwise
        if not o["token"]:
            raise CommandError(
                "--token is required (or GRAPHADMIN_TOKEN); see docs/learning.md: manage.py agent_token."
            )
        questions, policy, cfg, report = self._evaluate(o)
        t, moved = self._write_summary(o, questions, policy, cfg, report)
        self._write_feedback_rounds(report)
        self._write_files(o, report, t, moved)

    def _evaluate(self, o: dict):
        """Run the evaluation on the server: (questions, policy changes, config, report); CommandError on failure."""
        try:
            questions = load_questions(o["questions"])
            policy = parse_settings(o["policy_set"])
            with GraphClient(o["url"], o["token"], timeout=o["timeout"], retries=3) as client:
                org = o["org"] or self._only_organization(client)
                cfg = EvaluationConfig(
                    organization=org,
                    rounds=o["rounds"],
                    train_fraction=o["train_fraction"],
                    seed=o["seed"],
                    budget=o["budget"],
                    negative_rate=o["negative_rate"],
                    report_p=o["report_p"],
                    feedback=o["feedback"],
                    policy=policy,
                    wait_timeout=o["wait_timeout"],
                )
                report = evaluate(client, o["vault"], questions, cfg, log=lambda line: self.stderr.write(line))
        except EvaluationError as exc:
            raise CommandError(str(exc)) from exc
        except ApiError as exc:
            raise CommandError(f"the server refused a request: {exc}") from exc
        except (ServerError, httpx.HTTPError) as exc:
            raise CommandError(f"cannot talk to {o['url']}: {exc} (is `make run` running?)") from exc
        return questions, policy, cfg, report

    def _write_summary(self, o: dict, questions, policy, cfg, report) -> tuple[dict, dict]:
        """The run's header, the per-round table, the targets and the questions moved; (targets, moved)."""
        graphs = report.graphs
        self.stdout.write(
            f"vault {o['vault']}: {len(questions)} questions ({len(report.train)} train, {len(report.test)} test), "
            f"{cfg.rounds} rounds, seed {cfg.seed}, budget {cfg.budget or 'policy default'}, "
            f"negative rate {cfg.negative_rate}, feedback {cfg.feedback}"
            + (f" (report p {cfg.report_p})" if cfg.report_p < 1 else "")
            + (f", policy {json.dumps(policy, sort_keys=True)}" if policy else "")
        )
        self.stdout.write(
            f"graphs: learning {graphs['learning']['id']} ({graphs['learning']['slug']}), "
            f"frozen {graphs['frozen']['id']} ({graphs['frozen']['slug']}) in '{cfg.organization}'\n"
        )
        self.stdout.write(report.table())
        t = report.targets()
        self.stdout.write(
            f"\nlast round against round 0's frozen figure (base), recall@5: train {t['train_vs_base'] * 100:+.1f} "
            f"points (needed {t['train_vs_base_needed'] * 100:+.1f}: {'met' if t['train_vs_base_met'] else 'missed'}); "
            f"test {t['test_vs_base'] * 100:+.1f} points (allowed {t['test_vs_base_allowed'] * 100:+.1f}: "
            f"{'met' if t['test_vs_base_met'] else 'missed'}); frozen twin drift train "
            f"{t['twin_drift_train'] * 100:+.1f}, test {t['twin_drift_test'] * 100:+.1f} "
            f"({'none' if t['twin_met'] else 'it fell'})"
            + (
                f"; round 0 frozen against plain cosine, all questions: {t['frozen_vs_plain'] * 100:+.1f} points"
                if "frozen_vs_plain" in t
                else ""
            )
        )
        self.stdout.write(
            f"last round against the same round's twin, recall@5: train {t['train_gain'] * 100:+.1f} points "
            f"(needed {t['train_gain_needed'] * 100:+.1f}: "
            f"{'met' if t['train_met'] else 'missed'}); test {t['test_change'] * 100:+.1f} points "
            f"(allowed {t['test_change_allowed'] * 100:+.1f}: {'met' if t['test_met'] else 'missed'})"
        )
        moved = report.moved()
        self.stdout.write(
            "last round, questions by recall@5 against frozen: "
            + "; ".join(
                f"{side} {m['better']} better, {m['worse']} worse, {m['same']} same" for side, m in moved.items()
            )
        )
        return t, moved

    def _write_feedback_rounds(self, report) -> None:
        """One line per round that reported feedback: what the agent sent and how long applying it took."""
        for r in report.rounds:
            f = r["feedback"]
            if f["sessions"]:
                o_ = f["outcomes"]
                self.stdout.write(
                    f"feedback round {r['round']}: {f['sessions']} sessions, {f['uses']} uses, "
                    f"{f['negatives']} negatives, "
                    f"{f.get('responses', 0)} responses ({f.get('responses_applied', 0)} with uses detected); "
                    f"{o_['accepted']} accepted, {o_['rework']} rework, "
                    f"{o_['rejected']} rejected; applied in {f['wait_s']:.1f}s"
                    + (f"; {f['resent']} reports resent (lost by the worker)" if f["resent"] else "")
                    + (f"; {f['not_queued']} not queued" if f["not_queued"] else "")
                )

    def _write_files(self, o: dict, report, t: dict, moved: dict) -> None:
        """The JSON report and the plot, where asked for."""
        if o["json_out"]:
            with open(o["json_out"], "w", encoding="utf-8") as fh:
                json.dump({**report.as_dict(), "targets": t, "moved": moved, "summary": report.summary()}, fh, indent=2)
            self.stdout.write(f"wrote {o['json_out']}")
        if o["plot"]:
            try:
                write_evaluation_plot(report, o["plot"])
            except ImportError as exc:
                raise CommandError(f"--plot needs matplotlib (pip install -e '.[test]'): {exc}") from exc
            self.stdout.write(f"wrote {o['plot']}")

    @staticmethod
    def _only_organization(client: GraphClient) -> str:
        orgs = sorted({g["organization"] for g in client.graphs()})
        if len(orgs) != 1:
            raise CommandError(f"give --org: the token's user sees graphs in {orgs or 'no organization'}.")
        return orgs[0]
