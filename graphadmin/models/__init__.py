"""The graph core: tenancy, graphs, nodes, edges, edge types, policy and the audit chain."""

from .audit import AuditCheckpoint, AuditEvent
from .graph import Edge, EdgeStats, EdgeType, Graph, Node, NodeLexeme, NodeLexicon, NodeStats
from .outbox import OutboxTask
from .policy import PolicyRevision
from .tenancy import ROLES, Membership, Organization

__all__ = [
    "AuditCheckpoint",
    "AuditEvent",
    "Edge",
    "EdgeStats",
    "EdgeType",
    "Graph",
    "Membership",
    "Node",
    "NodeLexeme",
    "NodeLexicon",
    "NodeStats",
    "Organization",
    "OutboxTask",
    "PolicyRevision",
    "ROLES",
]
