"""The demo organization, users and graph that ``make run`` opens on.

Idempotent: running it again changes nothing. Until the vault importer lands this is a small
built-in graph; the users cover every role so each page can be tried as each of them.
"""

from __future__ import annotations

import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from graphadmin import services
from graphadmin.models import Edge, EdgeType, Graph, Membership, Node, Organization

DEMO_ORG = "demo"
DEMO_GRAPH = "demo"
DEMO_ROLES = {"admin": "admin", "operator": "operator", "analyst": "analyst", "reviewer": "reviewer"}

_NOTES = [
    ("architecture/overview", "architecture", "Architecture overview", "The service stores agent memory as a graph in PostgreSQL with pgvector."),
    ("architecture/ranking", "architecture", "Ranking", "Edges are scored at retrieval time from weight, semantic proximity and type priority."),
    ("decisions/use-postgres", "decision", "Use PostgreSQL", "We chose PostgreSQL with pgvector over a separate vector database."),
    ("research/vector-databases", "research", "Vector databases compared", "HNSW indexes in pgvector give good recall at our scale."),
    ("components/feedback", "component", "Feedback engine", "Reinforcement, outcome EMA and decay move the weights."),
]
_LINKS = [
    ("architecture/overview", "architecture/ranking", "related"),
    ("decisions/use-postgres", "research/vector-databases", "derived_from"),
    ("architecture/ranking", "components/feedback", "depends_on"),
    ("architecture/overview", "decisions/use-postgres", "related"),
]


def demo_password() -> str:
    """The demo users' password: DEMO_PASSWORD, else one generated once and kept in the local folder."""
    import os

    if os.environ.get("DEMO_PASSWORD"):
        return os.environ["DEMO_PASSWORD"]
    path = settings.LOCAL_DIR / "demo-password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12))
    return path.read_text().strip()


@transaction.atomic
def ensure_demo() -> tuple[Graph, str]:
    """Create (once) the demo organization, one user per role, and the demo graph; return it and the password."""
    password = demo_password()
    org, _ = Organization.objects.get_or_create(slug=DEMO_ORG, defaults={"name": "Demo team"})
    User = get_user_model()
    for username, role in DEMO_ROLES.items():
        user, created = User.objects.get_or_create(username=username, defaults={"is_staff": role == "admin"})
        if created or not user.check_password(password):
            user.set_password(password)
            user.save()
        Membership.objects.update_or_create(user=user, organization=org, defaults={"role": role})
    admin = User.objects.get(username="admin")
    graph = Graph.objects.filter(organization=org, slug=DEMO_GRAPH).first()
    if graph is None:
        graph = services.create_graph(admin, org, DEMO_GRAPH, "Demo project memory", "A small built-in demo graph.")
        nodes = {
            key: Node.objects.create(graph=graph, key=key, kind=kind, title=title, text=text, source=f"demo:{key}")
            for key, kind, title, text in _NOTES
        }
        types = {t.name: t for t in EdgeType.objects.filter(graph=graph)}
        Edge.objects.bulk_create(
            [Edge(graph=graph, source=nodes[s], target=nodes[t], edge_type=types[k]) for s, t, k in _LINKS]
        )
    return graph, password
