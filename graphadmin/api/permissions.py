"""Role checks for the API. Tenancy itself is in the querysets (``for_user``): others' rows are 404."""

from rest_framework.permissions import SAFE_METHODS, BasePermission

from graphadmin.models.tenancy import role_at_least, role_for


class RoleForWrites(BasePermission):
    """Reads need any membership (enforced by the queryset); writes need the view's ``write_role``.

    The view provides ``organization_id()`` (raises 404 for another organization's objects first,
    so an outsider never learns what exists).
    """

    message = "Your role in this organization may not do this."

    def has_permission(self, request, view):
        if request.method in SAFE_METHODS:
            return True
        org_id = view.organization_id()
        if org_id is None:  # creating at the top level: checked against the posted organization
            return True
        return role_at_least(role_for(request.user, org_id), view.write_role)
