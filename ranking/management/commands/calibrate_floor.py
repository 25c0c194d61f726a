"""manage.py calibrate_floor --graph SLUG [--org SLUG] [--target-recall 0.95] [--dry-run]: the abstention floor."""

from django.core.management.base import BaseCommand, CommandError

from graphadmin.errors import InputError
from graphadmin.models import Graph
from ranking import calibration


class Command(BaseCommand):
    help = (
        "Calibrate a graph's abstention floor (policy abstain_floor) from its own logged answers at a target recall, "
        "for the configured embedder, and write it as a new policy revision (audited)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--graph", required=True, help="Graph slug.")
        parser.add_argument("--org", help="Organization slug (needed when several organizations have that graph slug).")
        parser.add_argument(
            "--target-recall",
            type=float,
            default=calibration.DEFAULT_TARGET_RECALL,
            help="Share of the answers that helped (items used, or session accepted) the floor must keep "
            "(0.5..1; default 0.95).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Show the floor; write nothing.")

    def handle(self, *args, graph, org=None, target_recall=calibration.DEFAULT_TARGET_RECALL, dry_run=False, **options):
        graphs = Graph.objects.select_related("organization").filter(slug=graph)
        if org:
            graphs = graphs.filter(organization__slug=org)
        found = list(graphs[:2])
        if not found:
            raise CommandError(f"No graph with slug '{graph}'" + (f" in '{org}'." if org else "."))
        if len(found) > 1:
            raise CommandError(f"Several graphs have slug '{graph}': give --org.")
        target = found[0]
        try:
            if dry_run:
                _samples, result = calibration.calibrate(target, target_recall)
                revision = None
            else:
                revision, result = calibration.do_calibrate_floor(
                    target, actor="command:calibrate_floor", target_recall=target_recall
                )
        except InputError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.errors.items())) from exc
        negatives = (
            f"{result.abstained_negatives:.1%} of {result.negatives} rejected answers with nothing used would abstain"
            if result.abstained_negatives is not None
            else "no rejected answer with nothing used to measure it on"
        )
        self.stdout.write(
            f"{target}: floor {result.floor} keeps {result.recall:.1%} of {result.positives} answers that helped "
            f"(target {result.target_recall:.0%}); {negatives}."
        )
        if dry_run:
            self.stdout.write("Dry run: nothing written.")
        elif revision is None:
            self.stdout.write("The policy already has this floor: nothing written.")
        else:
            self.stdout.write(f"Written as policy revision r{revision.revision}.")
