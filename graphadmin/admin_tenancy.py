"""Admin base classes: staff users see and link only their organizations' rows; the admin's one
mapping of the domain errors (``graphadmin.errors``) to a message."""

from django.contrib import admin, messages

from graphadmin.errors import Conflict, DomainError
from graphadmin.tenancy import graph_access


def _scoped(qs, user):
    if user.is_superuser:
        return qs
    for_user = getattr(qs, "for_user", None)
    return for_user(user).distinct() if for_user else qs.none()


class TenantAdmin(admin.ModelAdmin):
    """Scopes the changelist, the change form and every foreign-key choice to the user's organizations."""

    def get_queryset(self, request):
        return _scoped(super().get_queryset(request), request.user)

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        related = db_field.remote_field.model
        if hasattr(related.objects, "for_user"):
            kwargs["queryset"] = _scoped(related.objects.all(), request.user)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)


class ReadOnlyAdmin(TenantAdmin):
    """For append-only ledgers: nothing can be added, changed or deleted through the admin."""

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
