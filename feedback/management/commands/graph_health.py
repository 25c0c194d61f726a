"""manage.py graph_health GRAPH_ID [-n N] [--json]: the learning-health figures of a graph (feedback.health)."""

import json

from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from feedback import health
from graphadmin.models import Graph


def _pct(share) -> str:
    return "—" if share is None else f"{share * 100:.1f}%"


class Command(BaseCommand):
    help = "Learning health over a graph's last N injections: which score components change rankings, what links "
    help += "bring, which weights moved in 7 and 30 days, link types still at their default, and the inert parts."

    def add_arguments(self, parser):
        parser.add_argument("graph_id", type=int)
        parser.add_argument("-n", type=int, default=health.DEFAULT_INJECTIONS, help="Last N injections.")
        parser.add_argument("--json", action="store_true", help="The API's answer, as JSON.")

    def handle(self, *args, graph_id, n, json=False, **options):
        graph = Graph.objects.filter(pk=graph_id).first()
        if graph is None:
            raise CommandError(f"No graph {graph_id}.")
        if not 1 <= n <= health.MAX_INJECTIONS:
            raise CommandError(f"-n: from 1 to {health.MAX_INJECTIONS}.")
        data = health.graph_health(graph, n=n)
        if json:
            self.stdout.write(_dumps(data))
            return
        out = self.stdout.write
        out(f"Learning health of graph {graph.pk} ({graph.slug}) over the last {data['injections']} injections")
        out("component      not zero  changed order  kept selected")
        for c in data["components"]:
            out(
                f"{c['component']:<14} {_pct(c['contributed']):>8}  {_pct(c['changed_order']):>13}  "
                f"{_pct(c['changed_selection']):>13}{'  inert' if c['inert'] else ''}"
            )
        reach = data["reach"]
        out(
            f"reached through a link: {_pct(reach['through_edge'])} of candidates, "
            f"{_pct(reach['selected_through_edge'])} of selected"
        )
        for r in reach["by_edge_type"]:
            out(f"  {r['edge_type']:<14} {_pct(r['share_of_candidates']):>8} {_pct(r['share_of_selected']):>8}")
        for m in data["weights_moved"]:
            out(f"{m['label']} moved: {_pct(m['share_7d'])} in 7 days, {_pct(m['share_30d'])} in 30 days")
        for t in data["edge_types"]:
            if t["never_left_default"]:
                out(f"link type {t['edge_type']}: {t['edges']} link(s), never left the default")
        for flag in data["flags"]:
            out(f"! {flag}")


def _dumps(data) -> str:
    return json.dumps(data, cls=DjangoJSONEncoder, indent=2)
