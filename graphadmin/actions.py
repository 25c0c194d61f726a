"""The core's writes: graphs, edge types, the policy, nodes and edges (create, update, archive), roles
(granted and revoked).

Each ``do_*`` is atomic, takes the acting user (or a label such as ``"command:import_vault"``) as
the keyword-only ``actor``, and appends its AuditEvent in the same transaction. Views, commands
and the admin call these; weights themselves change only through ``feedback.actions``.
"""

from __future__ import annotations

from django.db import transaction

from graphadmin import audit, clock
from graphadmin.errors import Conflict, InputError
from graphadmin.models import Edge, EdgeType, Graph, Membership, Node, PolicyRevision
from graphadmin.models.policy import POLICY_NUMBERS, priority_snapshot
from graphadmin.vault.parse import EDGE_TYPE_NAME, EDGE_TYPE_NAME_RULE

DEFAULT_EDGE_TYPES = {
    "related": "A body link between two notes.",
    "derived_from": "The source was derived from the target (a decision from its research).",
    "depends_on": "The source depends on the target (a component on another).",
}
GRAPH_SETTINGS = ("slug", "name", "description", "feedback_enabled", "text_search_config")


def _scope(graph: Graph) -> dict:
    return {"graph": graph.pk, "graph_slug": graph.slug}


def _user(actor):
    return actor if getattr(actor, "is_authenticated", False) else None


@transaction.atomic
def do_create_graph(
    organization,
    slug: str,
    name: str,
    description: str = "",
    *,
    actor,
    feedback_enabled: bool = True,
    edge_types=DEFAULT_EDGE_TYPES,
    text_search_config: str = "english",
) -> Graph:
    """Create a graph with policy revision 1 and its default edge types; audited as graph.create (with
    feedback_enabled when it starts off)."""
    graph = Graph.objects.create(
        organization=organization,
        slug=slug,
        name=name,
        description=description,
        feedback_enabled=feedback_enabled,
        text_search_config=text_search_config,
    )
    EdgeType.objects.bulk_create([EdgeType(graph=graph, name=n, description=d) for n, d in edge_types.items()])
    PolicyRevision.objects.create(
        graph=graph,
        revision=1,
        created_by=_user(actor),
        note="initial defaults",
        priorities=priority_snapshot(graph.pk),
    )
    payload = {"slug": slug, "name": name, **({} if feedback_enabled else {"feedback_enabled": False})}
    if text_search_config != "english":
        payload["text_search_config"] = text_search_config
    audit.append(organization, actor, "graph.create", payload, scope=_scope(graph))
    return graph


@transaction.atomic
def do_update_graph(graph: Graph, changes: dict, *, actor) -> Graph:
    """Change a graph's settings (slug, name, description, feedback_enabled, text_search_config); audited with
    before and after. A new text-search configuration re-indexes the graph's nodes (a database trigger)."""
    graph = Graph.objects.select_for_update().get(pk=graph.pk)
    diff = {
        k: {"before": getattr(graph, k), "after": v}
        for k, v in changes.items()
        if k in GRAPH_SETTINGS and getattr(graph, k) != v
    }
    if not diff:
        return graph
    for k, values in diff.items():
        setattr(graph, k, values["after"])
    graph.save(update_fields=[*diff, "updated_at"])
    audit.append(graph.organization_id, actor, "graph.update", {"changes": diff}, scope=_scope(graph))
    return graph


@transaction.atomic
def do_delete_graph(graph: Graph, *, actor) -> None:
    """Delete a graph and everything in it; audited as graph.delete (the event outlives the graph)."""
    audit.append(graph.organization_id, actor, "graph.delete", {"slug": graph.slug}, scope={"graph": graph.pk})
    graph.delete()


@transaction.atomic
def do_create_edge_type(graph: Graph, name: str, *, actor, priority: float = 0.0, description: str = "") -> EdgeType:
    """Add an edge type to a graph; audited as edgetype.create. The name follows the importer's rule."""
    _check_edge_type_name(name)
    edge_type = EdgeType.objects.create(graph=graph, name=name, priority=priority, description=description)
    audit.append(
        graph.organization_id,
        actor,
        "edgetype.create",
        {"edge_type": name, "priority": priority},
        scope=_scope(graph),
    )
    return edge_type


def _check_edge_type_name(name: str) -> None:
    """The vault importer's rule for edge-type names (every path that names one: API, admin, import)."""
    if not EDGE_TYPE_NAME.match(name or ""):
        raise InputError({"name": [EDGE_TYPE_NAME_RULE]})


@transaction.atomic
def do_update_edge_type(
    edge_type: EdgeType,
    *,
    actor,
    name: str | None = None,
    priority: float | None = None,
    description: str | None = None,
    note: str = "",
) -> EdgeType:
    """Rename an edge type, change its priority and/or description. A new name or description is audited as
    edgetype.update (before/after); a priority change goes through ``do_set_policy`` (a new policy revision
    recording the priority set, with ``note``)."""
    edge_type = EdgeType.objects.select_for_update().select_related("graph").get(pk=edge_type.pk)
    if name is not None and name != edge_type.name:
        _check_edge_type_name(name)
    changes = {
        field: {"before": getattr(edge_type, field), "after": value}
        for field, value in (("name", name), ("description", description))
        if value is not None and getattr(edge_type, field) != value
    }
    if changes:
        for field, values in changes.items():
            setattr(edge_type, field, values["after"])
        edge_type.save(update_fields=[*changes, "updated_at"])
        payload = {"edge_type": edge_type.pk, "name": edge_type.name, "changes": changes}
        audit.append(edge_type.graph.organization_id, actor, "edgetype.update", payload, scope=_scope(edge_type.graph))
    if priority is not None and priority != edge_type.priority:
        note = note or f"priority of {edge_type.name}: {edge_type.priority:g} → {priority:g}"
        do_set_policy(edge_type.graph, {}, actor=actor, note=note, priorities={edge_type: priority})
        edge_type.refresh_from_db()
    return edge_type


@transaction.atomic
def do_delete_edge_type(edge_type: EdgeType, *, actor) -> None:
    """Delete an edge type no edge uses (archived edges included: their history names it); audited as
    edgetype.delete. Refused with Conflict while edges use it."""
    edge_type = EdgeType.objects.select_for_update().select_related("graph").get(pk=edge_type.pk)
    used = Edge.objects.filter(graph_id=edge_type.graph_id, edge_type=edge_type).count()
    if used:
        raise Conflict(
            f"Edge type '{edge_type.name}' is used by {used} edge(s), archived ones included; it cannot be deleted."
        )
    payload = {"edge_type": edge_type.pk, "name": edge_type.name, "priority": edge_type.priority}
    audit.append(edge_type.graph.organization_id, actor, "edgetype.delete", payload, scope=_scope(edge_type.graph))
    edge_type.delete()


@transaction.atomic
def do_set_policy(
    graph: Graph,
    changes: dict,
    *,
    actor,
    note: str = "",
    priorities: dict[EdgeType, float] | None = None,
    base_revision: int | None = None,
) -> PolicyRevision:
    """Write a new policy revision from the current one plus ``changes`` (policy numbers) and ``priorities``
    (edge type -> new priority); the one write path of both. The revision records the graph's priority set
    after the change, so it can be listed, restored and measured like a change of numbers. Audited as
    policy.update with the differences (numbers in ``changes``, priorities by edge-type name in
    ``priorities``) and the note, plus one edgetype.priority.update (before/after) per priority changed.

    Values are validated by the caller's serializer or form and again by database check constraints.

    ``base_revision``: the revision the caller's change was made against (what the operator saw). When
    another change was saved since, nothing is written and ``Conflict`` names the revisions missed (a
    409 in the API, a message on the tune page): of two operators saving at once, one wins and the other
    is told, instead of the second silently undoing what the first set (``stale_policy``).
    """
    # Lock the graph row so two concurrent changes cannot both claim the same revision number; read the
    # newest revision after the lock (not the per-process cache): a change that waited sees the one before it.
    # NO KEY UPDATE: it queues the next change without blocking agents' inserts that point at the graph.
    Graph.objects.select_for_update(no_key=True).get(pk=graph.pk)
    current = PolicyRevision.objects.filter(graph=graph).order_by("-revision").select_related("created_by").first()
    if base_revision is not None:
        _check_base_revision(graph, base_revision, current)
    values = current.numbers() if current else {}
    diff = {k: {"before": values.get(k), "after": v} for k, v in changes.items() if values.get(k) != v}
    values.update(changes)
    priority_diff = {}
    wanted = {et.pk: value for et, value in (priorities or {}).items()}
    for edge_type in EdgeType.objects.select_for_update().filter(graph=graph, pk__in=wanted).order_by("pk"):
        before, after = edge_type.priority, wanted[edge_type.pk]
        if before == after:
            continue
        edge_type.priority = after
        edge_type.save(update_fields=["priority", "updated_at"])
        priority_diff[edge_type.name] = {"before": before, "after": after}
    if len(wanted) > len(priority_diff) and EdgeType.objects.filter(graph=graph, pk__in=wanted).count() < len(wanted):
        raise InputError({"priorities": ["An edge type of another graph (or deleted) cannot be set here."]})
    revision = PolicyRevision.objects.create(
        graph=graph,
        revision=(current.revision + 1) if current else 1,
        created_by=_user(actor),
        note=note,
        priorities=priority_snapshot(graph.pk),
        **{k: v for k, v in values.items() if k in POLICY_NUMBERS or k == "ceiling_mode"},
    )
    scope = _scope(graph)
    for name, change in priority_diff.items():
        payload = {"edge_type": name, **change}
        audit.append(graph.organization_id, actor, "edgetype.priority.update", payload, scope=scope)
    payload = {"revision": revision.revision, "changes": diff, "note": note}
    if priority_diff:
        payload["priorities"] = priority_diff
    audit.append(graph.organization_id, actor, "policy.update", payload, scope=scope)
    return revision


def _check_base_revision(graph: Graph, base_revision: int, current: PolicyRevision | None) -> None:
    """Refuse a change made against ``base_revision`` when the graph's newest revision is another one."""
    newest = current.revision if current else 0
    if base_revision == newest:
        return
    if base_revision > newest or base_revision < 1:
        message = f"Graph {graph.pk} has no policy revision {base_revision} (newest: {newest})."
        raise InputError({"base_revision": [message]})
    missed = list(range(base_revision + 1, newest + 1))
    by = getattr(current.created_by, "username", "") or "a task"
    message = (
        f"The policy changed since revision {base_revision}: revision {newest} was saved meanwhile (by {by}"
        f"{': ' + current.note if current.note else ''}). Nothing was saved: start again from revision {newest}."
    )
    raise Conflict(
        message,
        body={"detail": message, "base_revision": base_revision, "current_revision": newest, "missed": missed},
    )


def _kind(model_or_record) -> str:
    return "node" if model_or_record is Node or isinstance(model_or_record, Node) else "edge"


@transaction.atomic
def do_create_record(model: type[Node] | type[Edge], graph: Graph, fields: dict, *, actor) -> Node | Edge:
    """Create a node or an edge of ``graph`` from validated ``fields``; audited (``node.create``/``edge.create``)
    with the names of the fields set (texts and vectors stay out of the chain)."""
    record = model.objects.create(graph=graph, **fields)
    kind = _kind(model)
    payload = {kind: record.pk, "fields": sorted(fields)}
    audit.append(graph.organization_id, actor, f"{kind}.create", payload, scope=_scope(graph))
    return record


@transaction.atomic
def do_update_record(record: Node | Edge, changes: dict, *, actor) -> Node | Edge:
    """Change the given fields of a node or an edge (never its weights: the serializers keep those
    read-only after creation); audited (``node.update``/``edge.update``) with the names of the fields."""
    for name, value in changes.items():
        setattr(record, name, value)
    record.save(update_fields=[*changes, "updated_at"])
    kind = _kind(record)
    graph = Graph.objects.only("pk", "slug", "organization_id").get(pk=record.graph_id)
    payload = {kind: record.pk, "fields": sorted(changes)}
    audit.append(graph.organization_id, actor, f"{kind}.update", payload, scope=_scope(graph))
    return record


@transaction.atomic
def do_archive(record: Node | Edge, *, actor) -> Node | Edge:
    """Archive a node or an edge: its history stays, and it never appears in retrieval again; audited."""
    if record.archived:
        return record
    record.archived = True
    record.save(update_fields=["archived", "updated_at"])
    kind = "node" if isinstance(record, Node) else "edge"
    graph = Graph.objects.only("pk", "slug", "organization_id").get(pk=record.graph_id)
    audit.append(graph.organization_id, actor, f"{kind}.archive", {kind: record.pk}, scope=_scope(graph))
    return record


@transaction.atomic
def do_restore_records(graph: Graph, model: type[Node] | type[Edge], rows: dict[int, dict], *, actor) -> int:
    """Set the given fields of many nodes or edges of ``graph`` at once (what a rollback of a memory or
    import batch restores: texts, keys, tags, archived); audited once (``node.restore``/``edge.restore``)
    with the ids. Rows with the same set of fields are written in one statement each (bulk)."""
    if not rows:
        return 0
    now = clock.now()
    groups: dict[tuple, list] = {}
    for pk, fields in sorted(rows.items()):
        groups.setdefault(tuple(sorted(fields)), []).append(model(id=pk, graph_id=graph.pk, updated_at=now, **fields))
    for names, objs in groups.items():
        model.objects.bulk_update(objs, [*names, "updated_at"], batch_size=500)
    kind = _kind(model)
    ids = sorted(rows)
    payload = {f"{kind}s": ids[:100], "count": len(ids), "fields": sorted({n for names in groups for n in names})}
    audit.append(graph.organization_id, actor, f"{kind}.restore", payload, scope=_scope(graph))
    return len(ids)


@transaction.atomic
def do_grant_role(organization, user, role: str, *, actor) -> tuple[Membership, str | None]:
    """Give ``user`` the ``role`` in the organization (a new membership or a changed role), audited as
    membership.grant with the role before; returns the membership and that role (None: new member)."""
    org_id = organization if isinstance(organization, int) else organization.pk
    membership = Membership.objects.select_for_update().filter(user=user, organization_id=org_id).first()
    before = membership.role if membership else None
    if before == role:
        return membership, before
    membership, _ = Membership.objects.update_or_create(user=user, organization_id=org_id, defaults={"role": role})
    audit.append(org_id, actor, "membership.grant", {"user": user.get_username(), "role": role, "before": before})
    return membership, before


@transaction.atomic
def do_revoke_role(membership: Membership, *, actor) -> None:
    """Remove a user's membership of an organization (the user loses every access there), audited as
    membership.revoke with the role it had."""
    membership = Membership.objects.select_for_update().select_related("user").filter(pk=membership.pk).first()
    if membership is None:
        return
    payload = {"user": membership.user.get_username(), "before": membership.role}
    membership.delete()
    audit.append(membership.organization_id, actor, "membership.revoke", payload)
