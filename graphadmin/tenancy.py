"""Who may do what: the roles in order, one table of acts, and ``graph_access``, the one check.

The REST API (``graphadmin.api.permissions`` and each app's ``api.py``), the dashboard pages, the
MCP tools and the admin all ask ``graph_access(user, graph_id, act)``: another organization's graph
is ``NotFound`` (its existence is never revealed), a role below ``NEEDS[act]`` is ``Forbidden``.
Each medium maps those two once (``graphadmin.errors``).
"""

from __future__ import annotations

from dataclasses import dataclass

from graphadmin.errors import Forbidden, NotFound
from graphadmin.models import Graph, Membership
from graphadmin.models.tenancy import ROLES

# The minimum role of each act (ROLES is ordered: each role can do everything the previous one can).
NEEDS = {
    "read": "reviewer",  # every page and REST read: graphs, nodes, edges, batches, metrics, audit
    "retrieve": "reviewer",  # rank, search, context (the agent's own retrieval log), explain, what-if
    "report": "analyst",  # session feedback: uses, response text, outcome (an agent's service account)
    "analyze": "analyst",  # feedback impact: trend charts and CSV export
    "tune": "operator",  # edge types and their priorities, the policy (and its what-if preview)
    "operate": "operator",  # nodes, edges, decay, normalize, manual weights, rollback, vault import
    "administer": "admin",  # create, edit, archive and delete graphs
}


def role_at_least(role: str | None, needed: str) -> bool:
    """True when ``role`` ranks at or above ``needed`` in ROLES."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def allows(role: str | None, act: str) -> bool:
    """True when ``role`` may do ``act``."""
    return role_at_least(role, NEEDS[act])


def roles_for(act: str) -> tuple[str, ...]:
    """The roles that may do ``act`` (for querysets: ``for_user(user, NEEDS[act])``)."""
    return ROLES[ROLES.index(NEEDS[act]) :]


@dataclass(frozen=True)
class Access:
    """A graph and the user's role there: what a page, an endpoint or a tool is allowed (drives the navigation)."""

    graph: Graph
    role: str

    def allows(self, act: str) -> bool:
        return allows(self.role, act)

    @property
    def can_analyze(self) -> bool:
        return self.allows("analyze")

    @property
    def can_operate(self) -> bool:
        return self.allows("operate")


def require(role: str | None, act: str) -> None:
    """Raise Forbidden unless ``role`` may do ``act``."""
    if not allows(role, act):
        raise Forbidden(f"Your role in this organization may not do this (needs {NEEDS[act]}).")


def graph_access(user, graph_id, act: str = "read") -> Access:
    """The graph (with its organization) and the user's role there, in one query; raises NotFound or Forbidden."""
    graph = None
    if user is not None and user.is_authenticated and str(graph_id).isdigit():
        graph = Graph.objects.with_role(user).select_related("organization").filter(pk=int(graph_id)).first()
    if graph is None:
        raise NotFound(f"Graph {graph_id} not found.")
    require(graph.user_role, act)
    return Access(graph=graph, role=graph.user_role)


def organization_role(user, organization_id: int) -> str | None:
    """The user's role in the organization, or None when not a member (for acts with no graph yet: creating one)."""
    if user is None or not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, organization_id=organization_id).values_list("role", flat=True).first()
