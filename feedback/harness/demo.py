"""The demo organization, users and graph that ``make run`` opens on.

The demo graph is the Obsidian vault in ``demo/vault`` (a fictional parcel-tracking project),
imported with the vault importer. Idempotent: when the vault has not changed since the last run,
nothing is written (not even a batch); when it has, the import brings the graph up to date.
The users cover every role so each page can be tried as each of them.
"""

from __future__ import annotations

import os
import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from graphadmin import actions, clock
from graphadmin.embeddings import configured_model
from graphadmin.models import Graph, Membership, Organization
from graphadmin.vault.apply import do_reembed, stale_rows
from graphadmin.vault.parse import parse_vault
from graphadmin.vault.plan import ImportResult

from ..imports import do_import_vault
from .config import HistoryConfig, load_questions
from .history import history_end, simulate_history, simulated_sessions

DEMO_ORG = "demo"
DEMO_GRAPH = "demo"
DEMO_ROLES = {"admin": "admin", "operator": "operator", "analyst": "analyst", "reviewer": "reviewer", "agent": "agent"}
DEMO_VAULT = settings.BASE_DIR / "demo" / "vault"
CHANGE_COUNTS = (
    "nodes_created",
    "nodes_updated",
    "nodes_renamed",
    "nodes_archived",
    "edges_created",
    "edges_restored",
    "edges_archived",
)


def demo_password() -> str:
    """The demo users' password: DEMO_PASSWORD, else one generated once and kept in the local folder."""
    if os.environ.get("DEMO_PASSWORD"):
        return os.environ["DEMO_PASSWORD"]
    path = settings.LOCAL_DIR / "demo-password"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(12))
    return path.read_text().strip()


@transaction.atomic
def ensure_demo() -> tuple[Graph, str]:
    """Create (once) the demo organization, one user per role and the demo graph, import the demo vault
    when it changed, and return the graph and the password."""
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
        # A new demo graph is made and imported at the start of its simulated history (fill_demo_history),
        # so its notes, edges, first policy and import batch are as old as the sessions that follow.
        with clock.using(clock.SimulatedClock(history_start())):
            graph = actions.do_create_graph(
                org,
                DEMO_GRAPH,
                "Harbor project memory",
                "The demo vault: a fictional parcel-tracking project.",
                actor=admin,
            )
            import_demo_vault(graph)
    else:
        import_demo_vault(graph)
    reembed_if_stale(graph)
    return graph, password


def reembed_if_stale(graph: Graph) -> dict | None:
    """Re-embed the demo graph when its vectors are not the configured model's.

    (A demo made before a change of EMBEDDER.)
    """
    stale = stale_rows(graph.pk, configured_model())
    if not (stale["nodes"] or stale["edges"]):
        return None
    return do_reembed(graph, actor="command:rundemo")


def import_demo_vault(graph: Graph) -> ImportResult | None:
    """Import demo/vault into the graph unless a dry run shows it is already up to date."""
    parsed = parse_vault(DEMO_VAULT)
    if parsed.unresolved:
        raise ValueError(f"The demo vault has unresolved links: {[u.as_dict() for u in parsed.unresolved]}")
    plan = do_import_vault(graph, parsed, actor="command:rundemo", dry_run=True)
    if not any(plan.counts[name] for name in CHANGE_COUNTS):
        return None
    return do_import_vault(graph, parsed, actor="command:rundemo", embed="sync")


DEMO_HISTORY_SESSIONS = 160
DEMO_HISTORY_WEEKS = 9
DEMO_QUESTIONS = settings.BASE_DIR / "demo" / "questions.json"
DEMO_POLICY_CHANGE = {"learning_rate": 0.2, "coef_memory": 0.3}
DEMO_POLICY_NOTE = "demo: learn faster, lean more on what similar questions used"


def history_start(weeks: int = DEMO_HISTORY_WEEKS) -> datetime:
    """Where the demo's simulated history begins: ``weeks`` weeks before the start of today (UTC)."""
    return history_end() - timedelta(weeks=weeks)


def fill_demo_history(sessions: int = DEMO_HISTORY_SESSIONS, weeks: int = DEMO_HISTORY_WEEKS) -> dict:
    """Give the demo graph weeks of feedback history (once: only while it has no session).

    The simulator (``history.simulate_history``) drives ``sessions`` agent sessions
    through the real API as the demo service account ``agent`` (role agent: it owns the sessions it
    creates and reports on them), spread over the ``weeks`` weeks before today on a
    simulated clock: each asks one question of ``demo/questions.json`` by its text only (the path
    agents use), reports the given notes that answer it and an outcome; Celery's eager mode applies
    the reports inline through the same tasks and actions as the worker. Decay runs at each period
    boundary of that clock, the demo operator changes the policy halfway (``DEMO_POLICY_CHANGE``, revision 2),
    and every simulated day is rolled up, so the trend charts have weeks of points, the policy history a
    before and an after, and the explain list shows the questions.
    """
    graph = Graph.objects.select_related("organization").get(organization__slug=DEMO_ORG, slug=DEMO_GRAPH)
    if simulated_sessions(graph):
        return {"status": "skipped", "reason": "the demo graph already has sessions"}
    User = get_user_model()
    agent, operator = User.objects.get(username="agent"), User.objects.get(username="operator")
    cfg = HistoryConfig(sessions=sessions, weeks=weeks)
    history = simulate_history(
        agent,
        graph,
        load_questions(DEMO_QUESTIONS),
        cfg,
        start=history_start(weeks),
        policy_change=(operator, DEMO_POLICY_CHANGE, DEMO_POLICY_NOTE),
    )
    return {
        "status": "filled",
        "sessions": history.sessions,
        "weeks": weeks,
        "days": history.days,
        "decay_runs": history.decay_runs,
        "hit5_first": round(history.hit5_first, 2),
        "hit5_last": round(history.hit5_last, 2),
        "outcomes": history.outcomes,
        "policy_revisions": graph.current_policy().revision,
    }
