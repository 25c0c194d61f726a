"""Admin base classes: staff users see and link only their organizations' rows."""

from django.contrib import admin


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
