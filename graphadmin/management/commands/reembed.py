"""manage.py reembed --graph SLUG [--org SLUG] [--sync | --task]

Re-embeds a graph whose vectors were made by another model than the configured embedder's (after
changing EMBEDDER, or after upgrading from the hashing default), in batches, with a progress bar.
Large graphs (more than VAULT_IMPORT_SYNC_EMBED_LIMIT rows to embed) go to the Celery task
``graphadmin.reembed_graph`` on the ``embeddings`` queue unless --sync is given.
"""

from __future__ import annotations

import argparse

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from graphadmin import outbox
from graphadmin.embeddings import configured_model, stored_models
from graphadmin.management.progress import Progress
from graphadmin.models import Graph
from graphadmin.tasks import reembed_graph
from graphadmin.vault.apply import do_reembed, stale_rows

ACTOR = "command:reembed"


class Command(BaseCommand):
    help = "Re-embed a graph's nodes and edges whose vectors were not made by the configured embedder's model."

    def add_arguments(self, parser):
        parser.add_argument("--graph", required=True, help="Slug of the graph.")
        parser.add_argument("--org", help="Slug of the graph's organization (when the graph slug is not unique).")
        how = parser.add_mutually_exclusive_group()
        how.add_argument("--sync", action="store_true", help="Embed in this process, whatever the size.")
        how.add_argument("--task", action="store_true", help="Enqueue the Celery task, whatever the size.")
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="Show a progress bar (default: when stderr is a terminal).",
        )

    def handle(self, *args, graph, org, sync, task, progress, **options):
        target = self._graph(graph, org)
        model = configured_model()
        stale = stale_rows(target.pk, model)
        total = stale["nodes"] + stale["edges"]
        models = stored_models(target.pk)
        self.stdout.write(
            f"{target.organization.slug}/{target.slug}: vectors by {', '.join(models) or 'no model'}; "
            f"configured {model}; {stale['nodes']} nodes and {stale['edges']} edges to embed."
        )
        if total == 0:
            self.stdout.write(self.style.SUCCESS("Nothing to re-embed."))
            return
        if task or (not sync and total > settings.VAULT_IMPORT_SYNC_EMBED_LIMIT):
            # Through the task outbox: sent again by the sweeper if the broker is down or the worker dies.
            task_id = outbox.send_on_commit(reembed_graph.name, args=[target.pk, ACTOR], queue="embeddings")
            self.stdout.write(
                self.style.SUCCESS(f"Enqueued graphadmin.reembed_graph on queue 'embeddings': task {task_id}.")
            )
            return
        bars = Progress(progress)
        try:
            result = do_reembed(target, actor=ACTOR, progress=bars)
        finally:
            bars.close()
        self.stdout.write(
            self.style.SUCCESS(
                f"Re-embedded {result['nodes']} nodes and {result['edges']} edges with {model} "
                f"in {result['duration_ms'] / 1000:.1f} s."
            )
        )

    def _graph(self, slug, org_slug) -> Graph:
        graphs = Graph.objects.filter(slug=slug).select_related("organization")
        if org_slug:
            graphs = graphs.filter(organization__slug=org_slug)
        found = list(graphs[:2])
        if not found:
            raise CommandError(f"No graph '{slug}'" + (f" in organization '{org_slug}'." if org_slug else "."))
        if len(found) > 1:
            raise CommandError(f"Several graphs are called '{slug}'; name the organization with --org.")
        return found[0]
