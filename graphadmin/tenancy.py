"""Who may do what: the roles in order, one table of acts, and ``graph_access``, the one check.

The REST API (``graphadmin.api.permissions`` and each app's ``api.py``), the dashboard pages, the
MCP tools and the admin all ask ``graph_access(user, graph_id, act)``: another organization's graph
is ``NotFound`` (its existence is never revealed), a role below ``NEEDS[act]`` is ``Forbidden``.
Each medium maps those two once (``graphadmin.errors``). The agent role (service accounts) is
outside the ladder: ``AGENT_ACTS`` lists what it may do, and ``may_act_on_session`` says who may add
context to a session or report on it (its owner, or an operator).
"""

from __future__ import annotations

from dataclasses import dataclass

from graphadmin.errors import Forbidden, NotFound
from graphadmin.models import Graph, Membership
from graphadmin.models.tenancy import ROLES
from graphadmin.runtime import hotcache

# The minimum role of each act on the people's ladder (ROLES from reviewer up: each role can do
# everything the previous one can).
NEEDS = {
    "read": "reviewer",  # every page and REST read: graphs, nodes, edges, batches, metrics, audit, explain, what-if
    "retrieve": "reviewer",  # rank and search: computed answers, nothing logged
    # context: creates the session (the caller is its owner) and logs an injection, which bumps the
    # surfaced/traversed counters and the traversal stamps decay reads, and which the outcome EMA
    # then moves: a write. Reviewers and analysts only read.
    "context": "operator",
    "report": "operator",  # session feedback: uses, response text, outcome (see may_act_on_session)
    "analyze": "analyst",  # feedback impact: trend charts and CSV export
    "tune": "operator",  # edge types and their priorities, the policy (and its what-if preview)
    # agent-written memory (remember, link, forget): an agent on what it wrote (feedback.memory), people from here up
    "remember": "operator",
    "operate": "operator",  # nodes, edges, decay, normalize, manual weights, rollback, vault import
    "administer": "admin",  # create, edit, archive and delete graphs; memberships
}

# The agent role (service accounts) is first in ROLES and inherits nothing from the ladder: it may do
# exactly these acts, and context and report only on the sessions it created (may_act_on_session).
# It also lists its organization's graphs (to address them) and reads what its own sessions caused
# (their injections' explanations, their batches), nothing else.
AGENT = "agent"
AGENT_ACTS = frozenset({"retrieve", "context", "report", "remember"})

# Acts on one session (context into an existing session, its reports): its owner, or from this role up.
SESSION_ANY = "operator"


def role_at_least(role: str | None, needed: str) -> bool:
    """True when ``role`` ranks at or above ``needed`` on the ladder (``agent`` ranks below every role)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def allows(role: str | None, act: str) -> bool:
    """True when ``role`` may do ``act`` (for an agent: only the acts of AGENT_ACTS)."""
    if role == AGENT:
        return act in AGENT_ACTS
    return role_at_least(role, NEEDS[act])


def roles_for(act: str) -> tuple[str, ...]:
    """The roles that may do ``act``."""
    ladder = ROLES[ROLES.index(NEEDS[act]) :]  # from reviewer up: the agent is first in ROLES
    return ((AGENT,) if act in AGENT_ACTS else ()) + ladder


def may_act_on_session(role: str | None, user_id: int | None, owner_id: int | None) -> bool:
    """Whether a caller may add context to an existing session or report on it (uses, response, outcome).

    Its owner may (the user whose first context call created it), with a role that reports; so may an
    operator or admin on any session of the graph (they set weights by hand anyway, audited), which is
    also how a session older than owners (owner None) is still reported. Nobody else: a reviewer,
    an analyst, or another agent steering a session's feedback is what this refuses.
    """
    if not allows(role, "report"):
        return False
    own = owner_id is not None and owner_id == user_id
    return own or (role != AGENT and role_at_least(role, SESSION_ANY))


def require_session(role: str | None, user_id: int | None, owner_id: int | None, external_id: str) -> None:
    """Raise Forbidden unless ``may_act_on_session``."""
    if not may_act_on_session(role, user_id, owner_id):
        raise Forbidden(
            f"Session {external_id!r} belongs to another user: only its owner (or an operator) may add to it "
            "or report on it."
        )


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

    @property
    def can_administer(self) -> bool:
        return self.allows("administer")


def require(role: str | None, act: str) -> None:
    """Raise Forbidden unless ``role`` may do ``act``."""
    if not allows(role, act):
        needed = NEEDS[act] + (f" or {AGENT}" if act in AGENT_ACTS else "")
        yours = f"Your role in this organization, {role}," if role else "You"
        raise Forbidden(f"{yours} may not do this (needs {needed}).")


def graph_access(user, graph_id, act: str = "read") -> Access:
    """The graph (with its organization) and the user's role there, in one query; raises NotFound or Forbidden.

    Kept briefly per process (graphadmin.runtime.hotcache): a changed membership, graph or organization is seen by
    the next call."""
    graph = None
    if user is not None and user.is_authenticated and str(graph_id).isdigit():
        graph = hotcache.graph_role(
            user.pk,
            int(graph_id),
            lambda: Graph.objects.with_role(user).select_related("organization").filter(pk=int(graph_id)).first(),
        )
    if graph is None:
        raise NotFound(f"Graph {graph_id} not found.")
    require(graph.user_role, act)
    return Access(graph=graph, role=graph.user_role)


def organization_role(user, organization_id: int) -> str | None:
    """The user's role in the organization, or None when not a member (for acts with no graph yet: creating one)."""
    if user is None or not user.is_authenticated:
        return None
    return Membership.objects.filter(user=user, organization_id=organization_id).values_list("role", flat=True).first()
