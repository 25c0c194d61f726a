"""manage.py decay --graph SLUG [--org SLUG] [--dry-run]: decay one graph's untraversed edges now."""

from django.core.management.base import BaseCommand, CommandError

from feedback import actions
from feedback.queries import weights
from graphadmin.models import Graph


class Command(BaseCommand):
    help = "Decay the weights of a graph's edges not traversed during the period (idempotent per period)."

    def add_arguments(self, parser):
        parser.add_argument("--graph", required=True, help="Graph slug.")
        parser.add_argument("--org", help="Organization slug (needed when several organizations have that graph slug).")
        parser.add_argument("--dry-run", action="store_true", help="Show what would change; write nothing.")
        parser.add_argument("--chunk-size", type=int, default=actions.DECAY_CHUNK, help="Edge ids per transaction.")

    def handle(self, *args, graph, org=None, dry_run=False, chunk_size=actions.DECAY_CHUNK, **options):
        graphs = Graph.objects.select_related("organization").filter(slug=graph)
        if org:
            graphs = graphs.filter(organization__slug=org)
        found = list(graphs[:2])
        if not found:
            raise CommandError(f"No graph with slug '{graph}'" + (f" in '{org}'." if org else "."))
        if len(found) > 1:
            raise CommandError(f"Several graphs have slug '{graph}': give --org.")
        target = found[0]
        if dry_run:
            preview = weights.decay_preview(target)
            self.stdout.write(
                f"{target}: period {preview['period']} (not traversed since {preview['cutoff']}), "
                f"rate {preview['rate']}, "
                f"floor {preview['floor']}: {preview['edges']} edge(s) would decay; "
                f"{preview['chunks_already_applied']} chunk(s) of this period already applied."
            )
            for row in preview["sample"]:
                self.stdout.write(f"  edge {row['edge']}: {row['before']:.6f} -> {row['after']:.6f}")
            self.stdout.write("Dry run: nothing written.")
            return
        result = actions.do_decay(target, actor="command:decay", chunk_size=chunk_size)
        self.stdout.write(
            f"{target}: {result.status}: {result.edge_updates} edge(s) decayed in "
            f"{len(result.details['batches'])} batch(es) {result.details['batches']}, "
            f"{result.details['skipped_chunks']} chunk(s) already applied, {result.duration_ms:.0f} ms."
        )
