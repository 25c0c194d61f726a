"""Tenancy and roles for dashboard pages: another organization's graph is a 404, a missing role a 403."""

from __future__ import annotations

from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404

from graphadmin.models import Graph
from graphadmin.models.tenancy import role_at_least


@dataclass(frozen=True)
class Access:
    """The graph a page is about and what the user's role allows there (drives the navigation too)."""

    graph: Graph
    role: str

    @property
    def can_analyze(self) -> bool:
        return role_at_least(self.role, "analyst")

    @property
    def can_operate(self) -> bool:
        return role_at_least(self.role, "operator")


def graph_access(request, graph_id: int, needed: str = "reviewer") -> Access:
    """Fetch the graph through the user's organizations (404 otherwise) and require ``needed``."""
    graph = get_object_or_404(Graph.objects.with_role(request.user).select_related("organization"), pk=graph_id)
    if not role_at_least(graph.user_role, needed):
        raise PermissionDenied(f"This page needs the {needed} role.")
    return Access(graph=graph, role=graph.user_role)
