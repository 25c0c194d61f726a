"""manage.py simulate_sessions: does the graph learn? Simulated agent sessions through the real API.

Builds a world with a hidden ground truth and its frozen twin (organization ``simulation``), runs
the sessions (see feedback/harness/world.py), prints hit@5 and MRR per block for the learning and the
frozen policy, and the two targets. ``--plot`` writes docs/learning.png and docs/learning.html.
``--demo`` instead fills the demo graph with history (only when it has no session yet).
"""

import json
import logging

from django.conf import settings
from django.core.management.base import BaseCommand

from feedback.harness import world
from feedback.harness.config import WorldConfig
from feedback.harness.demo import fill_demo_history
from feedback.harness.plots import write_world_plots


class Command(BaseCommand):
    help = "Simulate agent sessions against a hidden ground truth; report hit@5 / MRR, learning vs frozen."

    def add_arguments(self, parser):
        d = WorldConfig()
        parser.add_argument("--sessions", type=int, default=d.sessions)
        parser.add_argument(
            "--shift-at", type=int, default=d.shift_at, help="Session at which the ground truth shifts (0: never)."
        )
        parser.add_argument("--block", type=int, default=d.block)
        parser.add_argument("--topics", type=int, default=8)
        parser.add_argument("--notes", type=int, default=24, help="Notes per topic.")
        parser.add_argument("--budget", type=int, default=d.budget, help="Context budget in items.")
        parser.add_argument("--p-ignore", type=float, default=d.p_ignore)
        parser.add_argument("--p-negative", type=float, default=d.p_negative)
        parser.add_argument("--seed", type=int, default=d.seed)
        parser.add_argument(
            "--policy", default="", help="Policy numbers for the run, JSON, e.g. '{\"learning_rate\": 0.2}'."
        )
        parser.add_argument("--json", help="Write the report to this file.")
        parser.add_argument("--plot", action="store_true", help="Write docs/learning.png and docs/learning.html.")
        parser.add_argument("--demo", action="store_true", help="Fill the demo graph with history instead (once).")

    def handle(self, *args, **o):
        logging.getLogger("celery.app.trace").setLevel(logging.WARNING)  # one INFO line per eager task otherwise
        if o["demo"]:
            result = fill_demo_history()
            self.stdout.write(f"demo history: {result}")
            return
        cfg = WorldConfig(
            sessions=o["sessions"],
            shift_at=o["shift_at"] or None,
            block=o["block"],
            budget=o["budget"],
            p_ignore=o["p_ignore"],
            p_negative=o["p_negative"],
            seed=o["seed"],
        )
        policy = json.loads(o["policy"]) if o["policy"] else None

        def progress(b):
            self.stdout.write(
                f"sessions {b.start + 1}-{b.end} (phase {b.phase}): hit@5 {b.hit5:.2f} vs frozen {b.frozen_hit5:.2f}; "
                f"MRR {b.mrr:.2f} vs {b.frozen_mrr:.2f}"
            )

        report = world.run_experiment(
            cfg, topics=o["topics"], notes_per_topic=o["notes"], policy=policy, progress=progress
        )
        self.stdout.write("\n" + report.table())
        self.stdout.write("\ntargets: " + json.dumps(report.targets()))
        self.stdout.write(f"outcomes: {report.outcomes}; decay runs: {report.decay_runs}")
        if o["json"]:
            with open(o["json"], "w") as fh:
                json.dump(report.as_dict(), fh, indent=2)
        if o["plot"]:
            write_world_plots(
                report, settings.BASE_DIR / "docs" / "learning.png", settings.BASE_DIR / "docs" / "learning.html"
            )
            self.stdout.write("wrote docs/learning.png and docs/learning.html")
