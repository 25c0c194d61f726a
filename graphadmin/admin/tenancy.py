"""Admin base classes: staff users see, pick and link only their organizations' rows, and edit only
what their role there allows; the admin's one mapping of the domain errors (``graphadmin.errors``)
to a message.

For a staff user who is not a superuser, the organization roles (``graphadmin.tenancy``) alone decide:
which tables show (any table to a member who reads: reviewer and up), which rows, and whether they may
be changed. Django's model permissions are not asked (the demo's ``admin`` is staff with none of them,
and a reviewer given all of them still may not write). A ModelAdmin names the act an add, change or
delete needs (``edit_act``); without one it is read-only. Rows are those of the
organizations where the user reads (reviewer and up: an agent's service account sees nothing); the
choices of a foreign key, the options of a list filter and the label a raw-id widget prints come
from the same scoped querysets, so no name of another organization's graph or node ever shows.
A superuser sees every row (and still writes through the audited actions each ModelAdmin calls).
"""

from django.contrib import admin, messages
from django.contrib.admin.widgets import ForeignKeyRawIdWidget

from graphadmin.errors import Conflict, DomainError
from graphadmin.models import Graph, Membership, Organization
from graphadmin.tenancy import NEEDS, allows, graph_access


def _scoped(qs, user, act: str = "read"):
    if user.is_superuser:
        return qs
    for_user = getattr(qs, "for_user", None)
    return for_user(user, NEEDS[act]).distinct() if for_user else qs.none()


def organization_of(obj) -> int | None:
    """The organization id a row belongs to (an organization, a row with one, or a graph's row)."""
    if isinstance(obj, Organization):
        return obj.pk
    if getattr(obj, "organization_id", None) is not None:
        return obj.organization_id
    if getattr(obj, "graph_id", None) is not None:
        return Graph.objects.filter(pk=obj.graph_id).values_list("organization_id", flat=True).first()
    return None


def may(user, act: str | None, obj=None) -> bool:
    """Whether a staff user's organization role allows ``act`` on ``obj`` (None: in any of its organizations)."""
    if act is None or not user.is_authenticated:  # the admin's login page asks too, for an anonymous user
        return False
    if user.is_superuser:
        return True
    roles = Membership.objects.filter(user=user)
    if obj is not None:
        org_id = organization_of(obj)
        roles = roles.filter(organization_id=org_id) if org_id is not None else roles.none()
    return any(allows(role, act) for role in roles.values_list("role", flat=True))


class ScopedRawIdWidget(ForeignKeyRawIdWidget):
    """A raw-id input whose label (the row's name beside the id) is looked up in the scoped queryset:
    typing another organization's node id shows nothing, not its title."""

    def __init__(self, rel, admin_site, queryset, **kwargs):
        super().__init__(rel, admin_site, **kwargs)
        self.queryset = queryset

    def label_and_url_for_value(self, value):
        key = self.rel.get_related_field().name
        try:
            if not self.queryset.filter(**{key: value}).exists():
                return "", ""
        except (ValueError, TypeError):
            return "", ""
        return super().label_and_url_for_value(value)


class TenantAdmin(admin.ModelAdmin):
    """Scopes the changelist, the change form, every foreign-key choice, list filter and raw-id label
    to the user's organizations, and add/change/delete to the role ``edit_act`` needs there."""

    edit_act: str | None = None  # the act an add, change or delete needs; None: read-only for everyone
    deletable = True  # False: rows are archived or kept, never deleted here

    def get_queryset(self, request):
        return _scoped(super().get_queryset(request), request.user)

    # Permissions derive from the organization role for everyone but a superuser, who keeps Django's.
    def has_module_permission(self, request):
        return super().has_module_permission(request) if request.user.is_superuser else may(request.user, "read")

    def has_view_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_view_permission(request, obj)
        return may(request.user, "read")  # rows: get_queryset keeps those of the organizations where the user reads

    def has_add_permission(self, request):
        if request.user.is_superuser:
            return super().has_add_permission(request)
        return may(request.user, self.edit_act)

    def has_change_permission(self, request, obj=None):
        if request.user.is_superuser:
            return super().has_change_permission(request, obj)
        return may(request.user, self.edit_act, obj)

    def has_delete_permission(self, request, obj=None):
        if not self.deletable:
            return False
        if request.user.is_superuser:
            return super().has_delete_permission(request, obj)
        return may(request.user, self.edit_act, obj)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.remote_field.model
        if hasattr(related.objects, "for_user"):
            # Choices where the user may make the edit (a node only into a graph the user operates).
            queryset = _scoped(related.objects.all(), request.user, self.edit_act or "read")
            kwargs["queryset"] = queryset
            if db_field.name in self.raw_id_fields:
                kwargs["widget"] = ScopedRawIdWidget(db_field.remote_field, self.admin_site, queryset)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_list_filter(self, request):
        # A foreign key's filter offers only the related rows present in the scoped changelist
        # (Django's RelatedOnlyFieldListFilter), never every graph of the database.
        out = []
        for item in super().get_list_filter(request):
            if isinstance(item, str) and self.model._meta.get_field(item).is_relation:
                item = (item, admin.RelatedOnlyFieldListFilter)
            out.append(item)
        return out


class ReadOnlyAdmin(TenantAdmin):
    """For append-only ledgers and rows an action owns: nothing can be added, changed or deleted through the admin."""

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


def check_graph(request, graph_id: int, act: str) -> None:
    """``graphadmin.tenancy.graph_access`` for an admin edit; a superuser may do anything."""
    if not request.user.is_superuser:
        graph_access(request.user, graph_id, act)


def attempt(modeladmin, request, label: str, work):
    """Run ``work()``; a domain error becomes a message on the changelist (and None is returned)."""
    try:
        return work()
    except DomainError as exc:
        level = messages.WARNING if isinstance(exc, Conflict) else messages.ERROR
        modeladmin.message_user(request, f"{label}: {exc}", level)
        return None
