"""Admin registrations of the graph core: raw records, scoped to the staff user's organizations and role.

Every edit goes through ``graphadmin.actions`` (audited), with the role ``graphadmin.tenancy`` asks
for: graphs and memberships (administer: granting and revoking roles, ``do_grant_role`` and
``do_revoke_role``), edge types and their priorities (tune), nodes and edges (operate: created,
updated and archived, never deleted here). The policy, weights, statistics and the audit chain are
read-only here (the policy changes through the tune page or the API, weights through feedback).
Users: a staff user who is not a superuser sees only the users of the organizations they administer
(and themselves), changes none of them, and never their own staff or superuser flags.
"""

from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import Q

from graphadmin import actions
from graphadmin.admin.tenancy import ReadOnlyAdmin, TenantAdmin, check_graph, may
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
from graphadmin.tenancy import organization_role, require, roles_for


@admin.register(Organization)
class OrganizationAdmin(ReadOnlyAdmin):
    """Read-only here: organizations are created by a superuser (``manage.py shell`` or the demo)."""

    list_display = ["slug", "name", "created_at"]
    search_fields = ["slug", "name"]


def administered_users(user):
    """The users a staff user may see and grant roles to: members of the organizations the user
    administers, the user, and users with no membership yet (nothing of another organization)."""
    User = get_user_model()
    if user.is_superuser:
        return User.objects.all()
    orgs = Membership.objects.filter(user=user, role__in=roles_for("administer")).values("organization_id")
    return User.objects.filter(
        Q(pk=user.pk) | Q(memberships__organization_id__in=orgs) | Q(memberships__isnull=True)
    ).distinct()


@admin.register(Membership)
class MembershipAdmin(TenantAdmin):
    """Roles: granted, changed and revoked through the audited actions, by an admin of the organization."""

    edit_act = "administer"
    list_display = ["user", "organization", "role"]
    list_filter = ["role"]

    def get_readonly_fields(self, request, obj=None):
        return ["user", "organization"] if obj else []

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        if db_field.name == "user":
            kwargs["queryset"] = administered_users(request.user).order_by("username")
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def save_model(self, request, obj, form, change):
        if not request.user.is_superuser:
            require(organization_role(request.user, obj.organization_id), "administer")
        membership, _before = actions.do_grant_role(obj.organization, obj.user, obj.role, actor=request.user)
        obj.pk = membership.pk

    def delete_model(self, request, obj):
        if not request.user.is_superuser:
            require(organization_role(request.user, obj.organization_id), "administer")
        actions.do_revoke_role(obj, actor=request.user)

    def delete_queryset(self, request, queryset):
        for membership in queryset.select_related("user"):
            self.delete_model(request, membership)


@admin.register(Graph)
class GraphAdmin(TenantAdmin):
    edit_act = "administer"
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
        for graph in queryset:
            self.delete_model(request, graph)


@admin.register(EdgeType)
class EdgeTypeAdmin(TenantAdmin):
    edit_act = "tune"
    deletable = False  # its edges would go with it
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


class RecordAdmin(TenantAdmin):
    """Nodes and edges: created and changed (archiving included) through ``do_create_record`` and
    ``do_update_record`` (audited with the fields' names), by an operator of the graph; never deleted."""

    edit_act = "operate"
    deletable = False

    def get_readonly_fields(self, request, obj=None):
        return [*self.readonly_fields, "graph"] if obj else self.readonly_fields

    def save_model(self, request, obj, form, change):
        check_graph(request, obj.graph_id, "operate")
        if change:
            # The fields whose value differs from the stored row (a form may report an equal JSON as changed).
            stored = type(obj).objects.get(pk=obj.pk)
            fields = {
                name: getattr(obj, name)
                for name in form.changed_data
                if name != "graph" and getattr(stored, name) != getattr(obj, name)
            }
            if fields:
                actions.do_update_record(obj, fields, actor=request.user)
            return
        fields = {f.name: getattr(obj, f.name) for f in obj._meta.concrete_fields if f.name in form.fields}
        fields.pop("graph", None)
        created = actions.do_create_record(type(obj), obj.graph, fields, actor=request.user)
        obj.pk = created.pk


@admin.register(Node)
class NodeAdmin(RecordAdmin):
    list_display = ["key", "title", "kind", "graph", "feedback_weight", "archived"]
    list_filter = ["kind", "archived"]
    search_fields = ["key", "title"]
    exclude = ["embedding"]
    readonly_fields = ["feedback_weight", "embedding_model"]  # the model of a vector the admin does not show


@admin.register(Edge)
class EdgeAdmin(RecordAdmin):
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


class ScopedUserAdmin(UserAdmin):
    """Users, for a staff user who is not a superuser: only those of the organizations they administer
    (``administered_users``), read-only; adding, deleting and the staff, superuser, group and
    permission flags are a superuser's."""

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        return qs if request.user.is_superuser else qs.filter(pk__in=administered_users(request.user).values("pk"))

    # Looking at users is an organization admin's (the role, not Django's model permissions).
    def has_module_permission(self, request):
        return request.user.is_superuser or may(request.user, "administer")

    def has_view_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_view_permission(request, obj)
        return may(request.user, "administer")

    def has_add_permission(self, request):
        return request.user.is_superuser and super().has_add_permission(request)

    def has_change_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        return request.user.is_superuser and super().has_delete_permission(request, obj)


admin.site.unregister(get_user_model())
admin.site.register(get_user_model(), ScopedUserAdmin)
