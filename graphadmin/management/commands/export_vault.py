"""manage.py export_vault GRAPH DIR [--org SLUG]

Writes a graph's live nodes and edges as an Obsidian vault (graphadmin.vault.export): one markdown file
per note at its key's path, frontmatter with kind, tags, aliases and the learned feedback_weight, links
in a section per edge type with each edge's weight. Importing it into an empty graph gives the same
nodes and edges. GRAPH is the graph's slug (or its id).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from graphadmin import audit
from graphadmin.models import Graph
from graphadmin.vault.export import export_to_dir

ACTOR = "command:export_vault"


class Command(BaseCommand):
    help = "Export a graph as an Obsidian vault (one markdown file per live note, links as [[wikilinks]])."

    def add_arguments(self, parser):
        parser.add_argument("graph", help="The graph's slug (or id).")
        parser.add_argument("dir", help="The folder to write the vault into (created if missing).")
        parser.add_argument("--org", help="The graph's organization slug, when the slug is not unique.")

    def handle(self, *args, graph, dir, org, **options):
        target = self._graph(graph, org)
        out = Path(dir)
        if out.exists() and not out.is_dir():
            raise CommandError(f"{out} exists and is not a folder.")
        result = export_to_dir(target, out)
        audit.append(
            target.organization_id,
            ACTOR,
            "graph.export",
            {"notes": result.notes, "edges": result.edges, "to": "folder"},
            scope={"graph": target.pk, "graph_slug": target.slug},
        )
        self.stdout.write(
            self.style.SUCCESS(f"Exported {target.organization.slug}/{target.slug}")
            + f": {result.notes} notes, {result.edges} edges into {out}"
        )
        for warning in result.warnings:
            self.stderr.write(f"  warning: {warning}")

    def _graph(self, ref: str, org_slug: str | None) -> Graph:
        graphs = Graph.objects.select_related("organization")
        graphs = graphs.filter(pk=int(ref)) if ref.isdigit() else graphs.filter(slug=ref)
        if org_slug:
            graphs = graphs.filter(organization__slug=org_slug)
        found = list(graphs[:2])
        if not found:
            raise CommandError(f"No graph '{ref}'.")
        if len(found) > 1:
            raise CommandError(f"Several graphs are called '{ref}'; name the organization with --org.")
        return found[0]
