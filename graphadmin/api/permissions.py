"""The API's role check: every view names its act, ``graphadmin.tenancy`` answers.

Tenancy and role come from one call (``graph_access``): another organization's graph is a 404
before anything else, so an outsider never learns what exists; a missing role is a 403.
"""

from rest_framework.permissions import SAFE_METHODS, BasePermission


class ActAllowed(BasePermission):
    """Reads need the view's ``read_act`` (default ``read``), writes its ``write_act``.

    The view provides ``check_access(act)``, which raises ``graphadmin.errors.NotFound`` or
    ``Forbidden`` (mapped by ``graphadmin.api.errors``).
    """

    def has_permission(self, request, view):
        act = getattr(view, "read_act", "read") if request.method in SAFE_METHODS else view.write_act
        view.check_access(act)
        return True
