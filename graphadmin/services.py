"""Actions on the graph core: create graphs, change edge-type priorities and the policy.

Each is atomic, takes the acting user, and writes its AuditEvent. Views and commands call these;
weights themselves change only through ``feedback.actions``.
"""

from __future__ import annotations

from django.db import transaction

from graphadmin import audit
from graphadmin.models import EdgeType, Graph, PolicyRevision
from graphadmin.models.policy import POLICY_NUMBERS

DEFAULT_EDGE_TYPES = {
    "related": "A body link between two notes.",
    "derived_from": "The source was derived from the target (a decision from its research).",
    "depends_on": "The source depends on the target (a component on another).",
}


def _scope(graph: Graph) -> dict:
    return {"graph": graph.pk, "graph_slug": graph.slug}


@transaction.atomic
def create_graph(
    actor, organization, slug: str, name: str, description: str = "", edge_types=DEFAULT_EDGE_TYPES
) -> Graph:
    """Create a graph with policy revision 1 and its default edge types; audited as graph.create."""
    graph = Graph.objects.create(organization=organization, slug=slug, name=name, description=description)
    PolicyRevision.objects.create(graph=graph, revision=1, created_by=_user(actor), note="initial defaults")
    EdgeType.objects.bulk_create([EdgeType(graph=graph, name=n, description=d) for n, d in edge_types.items()])
    audit.append(organization, actor, "graph.create", {"slug": slug, "name": name}, scope=_scope(graph))
    return graph


@transaction.atomic
def update_edge_type(
    actor, edge_type: EdgeType, *, priority: float | None = None, description: str | None = None
) -> EdgeType:
    """Change an edge type's priority and/or description; a priority change is audited with before and after."""
    edge_type = EdgeType.objects.select_for_update().get(pk=edge_type.pk)
    before = edge_type.priority
    if description is not None:
        edge_type.description = description
    if priority is not None:
        edge_type.priority = priority
    edge_type.save()
    if priority is not None and priority != before:
        audit.append(
            edge_type.graph.organization_id,
            actor,
            "edgetype.priority.update",
            {"edge_type": edge_type.name, "before": before, "after": priority},
            scope=_scope(edge_type.graph),
        )
    return edge_type


@transaction.atomic
def set_policy(actor, graph: Graph, changes: dict, note: str = "") -> PolicyRevision:
    """Write a new policy revision from the current one plus ``changes``; audited with the differences.

    Values are validated by the caller's serializer and again by database check constraints.
    """
    # Lock the graph row so two concurrent changes cannot both claim the same revision number.
    Graph.objects.select_for_update().get(pk=graph.pk)
    current = graph.current_policy()
    values = current.numbers() if current else {}
    diff = {k: {"before": values.get(k), "after": v} for k, v in changes.items() if values.get(k) != v}
    values.update(changes)
    revision = PolicyRevision.objects.create(
        graph=graph,
        revision=(current.revision + 1) if current else 1,
        created_by=_user(actor),
        note=note,
        **{k: v for k, v in values.items() if k in POLICY_NUMBERS or k == "ceiling_mode"},
    )
    audit.append(
        graph.organization_id,
        actor,
        "policy.update",
        {"revision": revision.revision, "changes": diff, "note": note},
        scope=_scope(graph),
    )
    return revision


def _user(actor):
    return actor if getattr(actor, "is_authenticated", False) else None
