"""Admin registrations of the graph core: raw records, scoped to the staff user's organizations.

Graphs, edge types, nodes, edges and membership roles are saved and deleted through ``graphadmin.actions``
(audited), with the role ``graphadmin.tenancy`` asks for (administer, tune, operate); deleting a node or an
edge archives it.
"""

from django.contrib import admin

from graphadmin import actions
from graphadmin.admin_tenancy import ReadOnlyAdmin, TenantAdmin, attempt, check_graph
from graphadmin.models import (
    AuditEvent,
    Edge,
    EdgeStats,
    EdgeType,
    Graph,
    Membership,
    Node,
    NodeStats,
    Organization,
    PolicyRevision,
)
from graphadmin.tenancy import organization_role, require


@admin.register(Organization)
class OrganizationAdmin(TenantAdmin):
    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


@admin.register(Membership)
class MembershipAdmin(TenantAdmin):
    list_display = ["user", "organization", "role"]
    list_filter = ["role"]

    def get_readonly_fields(self, request, obj=None):
        return ["user", "organization"] if obj else []

    def save_model(self, request, obj, form, change):
        if not request.user.is_superuser:
            require(organization_role(request.user, obj.organization_id), "administer")
        membership, _before = actions.do_grant_role(obj.organization, obj.user, obj.role, actor=request.user)
        obj.pk = membership.pk


@admin.register(Graph)
class GraphAdmin(TenantAdmin):
    list_display = ["slug", "name", "organization", "feedback_enabled", "created_at"]

    def get_readonly_fields(self, request, obj=None):
        return ["organization"] if obj else []

    def save_model(self, request, obj, form, change):
        if change:
            check_graph(request, obj.pk, "administer")
            actions.do_update_graph(obj, {k: getattr(obj, k) for k in actions.GRAPH_SETTINGS}, actor=request.user)
            return
        if not request.user.is_superuser:
            require(organization_role(request.user, obj.organization_id), "administer")
        created = actions.do_create_graph(
            obj.organization,
            obj.slug,
            obj.name,
            obj.description,
            actor=request.user,
            feedback_enabled=obj.feedback_enabled,
        )
        obj.pk = created.pk

    def delete_model(self, request, obj):
        check_graph(request, obj.pk, "administer")
        actions.do_delete_graph(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        # The changelist's "delete selected": one audited delete per graph, not one unaudited query.
        for graph in queryset:
            self.delete_model(request, graph)


@admin.register(EdgeType)
class EdgeTypeAdmin(TenantAdmin):
    list_display = ["name", "graph", "priority"]
    list_filter = ["graph"]

    def get_readonly_fields(self, request, obj=None):
        return ["graph"] if obj else []

    def save_model(self, request, obj, form, change):
        check_graph(request, obj.graph_id, "tune")
        if change:
            values = {"name": obj.name, "priority": obj.priority, "description": obj.description}
            actions.do_update_edge_type(obj, actor=request.user, **values)
        else:
            created = actions.do_create_edge_type(
                obj.graph, obj.name, actor=request.user, priority=obj.priority, description=obj.description
            )
            obj.pk = created.pk

    def delete_model(self, request, obj):
        check_graph(request, obj.graph_id, "tune")
        attempt(self, request, f"Edge type '{obj.name}'", lambda: actions.do_delete_edge_type(obj, actor=request.user))

    def delete_queryset(self, request, queryset):
        for edge_type in queryset.select_related("graph"):
            self.delete_model(request, edge_type)


class GraphChildAdmin(TenantAdmin):
    """Nodes and edges: every save and delete through ``graphadmin.actions`` (audited, the ``operate`` role).

    Deleting archives, as the API's DELETE does: the row's weight history and the sessions that surfaced
    it stay readable, and it never appears in retrieval again.
    """

    def save_model(self, request, obj, form, change):
        check_graph(request, obj.graph_id, "operate")
        fields = {name: form.cleaned_data[name] for name in form.changed_data if name in form.cleaned_data}
        if not change:
            fields.pop("graph", None)
            created = actions.do_create_record(type(obj), obj.graph, fields, actor=request.user)
            obj.pk, obj._state.adding = created.pk, False
            return
        # What the form calls changed, kept only where the value differs from the row's (an unchanged JSON
        # list such as aliases is "changed" to Django's form).
        before = type(obj).objects.get(pk=obj.pk)
        attname = {name: obj._meta.get_field(name).attname for name in fields}
        fields = {n: v for n, v in fields.items() if getattr(before, attname[n]) != getattr(obj, attname[n])}
        # Archiving is its own action (audited as node.archive / edge.archive); restoring is an update.
        archive = fields.get("archived") is True
        if archive:
            del fields["archived"]
        if fields:
            actions.do_update_record(obj, fields, actor=request.user)
        if archive:
            obj.archived = False  # set by the form; the action archives (and audits) it
            actions.do_archive(obj, actor=request.user)

    def delete_model(self, request, obj):
        check_graph(request, obj.graph_id, "operate")
        actions.do_archive(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for record in queryset:
            self.delete_model(request, record)


@admin.register(Node)
class NodeAdmin(GraphChildAdmin):
    list_display = ["key", "title", "kind", "graph", "feedback_weight", "archived"]
    list_filter = ["kind", "archived"]
    search_fields = ["key", "title"]
    exclude = ["embedding"]
    readonly_fields = ["feedback_weight", "embedding_model"]  # the model of a vector the admin does not show


@admin.register(Edge)
class EdgeAdmin(GraphChildAdmin):
    list_display = ["id", "source", "edge_type", "target", "weight", "feedback_weight", "archived"]
    list_filter = ["archived"]
    raw_id_fields = ["source", "target"]
    exclude = ["triplet_embedding"]
    readonly_fields = ["weight", "feedback_weight", "embedding_model"]


@admin.register(NodeStats)
class NodeStatsAdmin(ReadOnlyAdmin):
    list_display = ["node", "surfaced_count", "traversed_count", "used_count"]


@admin.register(EdgeStats)
class EdgeStatsAdmin(ReadOnlyAdmin):
    list_display = ["edge", "surfaced_count", "traversed_count", "used_count", "last_traversed_at"]


@admin.register(PolicyRevision)
class PolicyRevisionAdmin(ReadOnlyAdmin):
    list_display = ["graph", "revision", "created_at", "created_by", "note"]


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyAdmin):
    list_display = ["organization", "seq", "created_at", "actor", "action"]
    list_filter = ["action"]
