"""manage.py import_vault PATH --graph SLUG [--org SLUG] [--dry-run] [--create-missing] [--no-wait]

Imports an Obsidian vault (a folder or a zip) into a graph, then waits until the graph is ready (every
vector written, whichever process writes them); see docs/import.md for the rules.
"""

from __future__ import annotations

import argparse

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from feedback.imports import do_import_vault
from graphadmin import actions, readiness
from graphadmin.management.progress import Progress
from graphadmin.models import Graph, Organization
from graphadmin.vault.parse import VaultError, group_unresolved, parse_vault

ACTOR = "command:import_vault"


class Command(BaseCommand):
    help = "Import an Obsidian vault (folder or .zip) into a graph: notes become nodes, links become edges."

    def add_arguments(self, parser):
        parser.add_argument("path", help="The vault folder, or a zip of it.")
        parser.add_argument("--graph", required=True, help="Slug of the target graph.")
        parser.add_argument(
            "--org",
            help="Slug of the graph's organization (required when the slug is not unique, "
            "or to create the graph when it does not exist).",
        )
        parser.add_argument("--dry-run", action="store_true", help="Report what would change; write nothing.")
        parser.add_argument(
            "--create-missing",
            action="store_true",
            help="Create placeholder nodes (kind 'missing') for links to notes that do not exist.",
        )
        parser.add_argument(
            "--embed",
            choices=["auto", "sync", "task"],
            default="auto",
            help="Embed in this process, in the Celery 'embeddings' task, or auto (task for large imports).",
        )
        parser.add_argument(
            "--progress",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="Show progress bars (default: when stderr is a terminal).",
        )
        parser.add_argument(
            "--wait",
            action=argparse.BooleanOptionalAction,
            default=True,
            help="Wait until every vector is written, by this import or by the embeddings task (default); "
            "--no-wait returns once the import commits, and the graph's vectors_pending says when it is ready.",
        )
        parser.add_argument(
            "--wait-timeout",
            type=float,
            default=3600.0,
            help="Seconds to wait for the vectors before giving up with an error (default 3600).",
        )

    def handle(self, *args, path, graph, org, dry_run, create_missing, embed, progress, wait, wait_timeout, **options):
        bars = Progress(progress)
        try:
            parsed = parse_vault(path, progress=bars, create_missing=create_missing)
            # A dry run against a graph that does not exist yet creates it inside the rolled-back transaction.
            with transaction.atomic():
                target = self._graph(graph, org)
                result = do_import_vault(target, parsed, actor=ACTOR, dry_run=dry_run, embed=embed, progress=bars)
                if dry_run:
                    transaction.set_rollback(True)
            # Committed: the embeddings task (a large import) has been sent and writes the vectors meanwhile.
            pending = None if dry_run else self._ready(target, result, bars, wait, wait_timeout)
        except VaultError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bars.close()
        self._report(target, result, pending, wait)

    def _ready(self, graph, result, bars, wait: bool, timeout: float) -> int:
        """The graph's vectors still pending once the import is done: waited for (unless --no-wait)."""
        if not wait or not result.embed_task:
            # --no-wait, or embedded in the import itself: nothing of this import's is left to wait for.
            return readiness.vectors_pending(graph.pk)

        def stalled(seconds: float) -> None:
            self.stderr.write(
                f"  no vector written for {seconds:.0f} s: is a Celery worker serving the 'embeddings' queue? "
                "(the import is committed; --no-wait returns at once)"
            )

        try:
            return readiness.wait_ready(
                graph.pk, timeout=timeout, task_id=result.embed_task or None, progress=bars, stalled=stalled
            )
        except readiness.NotReady as exc:
            raise CommandError(
                f"Imported into {graph.organization.slug}/{graph.slug} (batch {result.batch_id}), but the graph is "
                f"not ready: {exc} The embeddings task on queue 'embeddings' writes them; the graph's "
                "vectors_pending (GET /api/graphs/ID/) says when it is ready."
            ) from exc

    def _graph(self, slug, org_slug):
        graphs = Graph.objects.filter(slug=slug).select_related("organization")
        if org_slug:
            if not Organization.objects.filter(slug=org_slug).exists():
                raise CommandError(f"No organization '{org_slug}'.")
            graphs = graphs.filter(organization__slug=org_slug)
        found = list(graphs[:2])
        if len(found) > 1:
            raise CommandError(f"Several graphs are called '{slug}'; name the organization with --org.")
        if found:
            return found[0]
        if not org_slug:
            raise CommandError(f"No graph '{slug}'. Give --org to create it.")
        self.stdout.write(f"No graph '{org_slug}/{slug}' yet: creating it (a dry run keeps nothing).")
        return actions.do_create_graph(Organization.objects.get(slug=org_slug), slug, slug, actor=ACTOR)

    def _report(self, graph, result, pending: int | None, waited: bool):
        c, unresolved, warnings = result.counts, result.unresolved, result.warnings
        head = "Dry run, nothing written" if result.dry_run else f"Imported into {graph.organization.slug}/{graph.slug}"
        self.stdout.write(self.style.SUCCESS(head) + f": {c['notes']} notes.")
        self.stdout.write(
            f"  nodes: {c['nodes_created']} created, {c['nodes_updated']} updated, {c['nodes_renamed']} renamed, "
            f"{c['nodes_archived']} archived, {c['nodes_unchanged']} unchanged"
        )
        self.stdout.write(
            f"  edges: {c['edges_created']} created, {c['edges_restored']} restored, {c['edges_archived']} archived, "
            f"{c['edges_unchanged']} unchanged; edge types created: {c['edge_types_created']}"
        )
        self.stdout.write(f"  attachment links: {c['attachment_links']}; files skipped: {c['files_skipped']}")
        if not result.dry_run:
            how = "in this import" if result.embedding == "sync" else "by the Celery task on queue 'embeddings'"
            self.stdout.write(f"  embeddings: {how}; batch {result.batch_id}, audit seq {result.audit_seq}")
            if not pending:
                self.stdout.write("  vectors pending: 0 (the graph is ready)")
            elif waited or not result.embed_task:
                # Not this import's to write: rows created without a vector, or texts the model finds nothing in.
                self.stdout.write(
                    f"  vectors pending: {pending} (rows without a vector this import does not write: created "
                    "without one, or a text the model finds nothing to embed in)"
                )
            else:
                self.stdout.write(
                    f"  vectors pending: {pending} (--no-wait: the embeddings task is writing them; the graph's "
                    "vectors_pending says when it is ready)"
                )
        self.stdout.write(f"  unresolved links: {len(unresolved)}")
        for group in group_unresolved(unresolved):
            self.stdout.write(f"    {group['reason']} ({group['count']}):")
            for u in group["links"]:
                line = f"      {u['source']}: [[{u['target']}]] ({u['edge_type']})"
                if u.get("candidates"):
                    line += ": " + " or ".join(u["candidates"])
                self.stdout.write(line)
        for w in warnings:
            self.stderr.write(f"  warning: {w}")
