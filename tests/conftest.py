"""The cast every test shares: two organizations, one user per role, one graph each.

acme: alice (admin), oscar (operator), ana (analyst), rita (reviewer), ada and abe (agents: service
accounts, each reporting only on the sessions it created); graph ``acme_graph``.
globex: mallory (admin); graph ``globex_graph``. Mallory must never see anything of acme.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.test import APIClient

from graphadmin import actions
from graphadmin.embeddings import embed_texts
from graphadmin.models import Edge, EdgeType, Membership, Node, Organization

ROOT = Path(__file__).resolve().parent.parent


def _flush_past_the_truncate_refusals():
    """Let the test database be flushed between transactional tests.

    Django flushes with TRUNCATE, which the ledgers' statement triggers refuse (migrations graphadmin 0008,
    feedback 0010). The test database's owner is a superuser, so the flush runs with
    ``session_replication_role = replica`` (no trigger fires), the way the table owner would on purpose.
    """
    from django.db.backends.postgresql.operations import DatabaseOperations

    plain = DatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        with self.connection.cursor() as cur:
            cur.execute("SET session_replication_role = replica")
        try:
            plain(self, sql_list)
        finally:
            with self.connection.cursor() as cur:
                cur.execute("SET session_replication_role = DEFAULT")

    DatabaseOperations.execute_sql_flush = execute_sql_flush


_flush_past_the_truncate_refusals()


@pytest.fixture(autouse=True)
def _fresh_throttles():
    """Throttle counters (in the cache: bad tokens per address) start from zero in every test."""
    cache.clear()


@pytest.fixture(scope="session", autouse=True)
def audit_anchor_file(tmp_path_factory):
    """Each test session anchors its chains in a file of its own (workers and servers it starts inherit it).

    The test database is created afresh each session, so its organizations' ids come back: anchors of an
    earlier session, in the shared default file, would be taken for this session's and fail its chains.
    """
    from django.conf import settings

    path = tmp_path_factory.mktemp("audit-anchors") / "anchors.jsonl"
    settings.AUDIT_ANCHOR_FILE = str(path)
    os.environ["AUDIT_ANCHOR_FILE"] = str(path)
    return path


@pytest.fixture
def acme(db):
    return Organization.objects.create(slug="acme", name="Acme")


@pytest.fixture
def globex(db):
    return Organization.objects.create(slug="globex", name="Globex")


def _member(org, username, role):
    user = get_user_model().objects.create_user(username=username, password="pw-" + username)
    Membership.objects.create(user=user, organization=org, role=role)
    return user


@pytest.fixture
def alice(acme):
    return _member(acme, "alice", "admin")


@pytest.fixture
def oscar(acme):
    return _member(acme, "oscar", "operator")


@pytest.fixture
def ana(acme):
    return _member(acme, "ana", "analyst")


@pytest.fixture
def rita(acme):
    return _member(acme, "rita", "reviewer")


@pytest.fixture
def ada(acme):
    return _member(acme, "ada", "agent")


@pytest.fixture
def abe(acme):
    """A second agent of acme: ada's sessions are not his."""
    return _member(acme, "abe", "agent")


@pytest.fixture
def mallory(globex):
    return _member(globex, "mallory", "admin")


@pytest.fixture
def acme_graph(acme, alice):
    return actions.do_create_graph(acme, "memory", "Acme memory", actor=alice)


@pytest.fixture
def globex_graph(globex, mallory):
    return actions.do_create_graph(globex, "memory", "Globex memory", actor=mallory)


@pytest.fixture
def small_graph(acme_graph):
    """Three nodes a -> b (related), b -> c (depends_on) in acme_graph."""
    nodes = {k: Node.objects.create(graph=acme_graph, key=k, title=k.upper(), text=f"note {k}") for k in "abc"}
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    depends = EdgeType.objects.get(graph=acme_graph, name="depends_on")
    Edge.objects.create(graph=acme_graph, source=nodes["a"], target=nodes["b"], edge_type=related)
    Edge.objects.create(graph=acme_graph, source=nodes["b"], target=nodes["c"], edge_type=depends)
    return nodes


@pytest.fixture
def api():
    """api(user) -> an APIClient authenticated as that user (None: anonymous)."""

    def make(user=None):
        client = APIClient()
        if user is not None:
            client.force_authenticate(user)
        return client

    return make


@pytest.fixture(scope="session")
def celery_worker_process(django_db_setup, django_db_blocker, tmp_path_factory):
    """A real Celery worker process on the test database, with the configured broker, as the application role.

    Redis when CELERY_BROKER_URL is set (CI), otherwise kombu's filesystem transport in a
    private folder. Tests using it must use ``transactional_db`` so the worker sees their rows.
    """
    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    env["DATABASE_NAME"] = connection.settings_dict["NAME"]
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    # As in `make run`: the worker connects as the application's database role (embedded server), which owns
    # nothing, so every task the suite runs on it shows it needs no more (docs/security.md "Database roles").
    env["DATABASE_ROLE"] = "app"
    log_path = tmp_path_factory.mktemp("celery-log") / "worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "graphadmin",
            "worker",
            "--loglevel=INFO",
            "--concurrency=2",
            "--without-heartbeat",
            "--without-gossip",
            "--without-mingle",
            "-Q",
            ",".join(settings.WORKER_QUEUES),
        ],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"Celery worker did not start:\n{log_path.read_text()}")
        time.sleep(0.2)
    proc.log_path = log_path
    yield proc
    stop(proc)
    log.close()


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """Stop a child process: SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


# The ranked graph (fixture ``rg``) shared by ranking, feedback and dashboard tests.
TEXTS = {
    "a": ("Architecture", "The service stores agent memory as a graph in PostgreSQL."),
    "b": ("Ranking", "Edges are ranked by weight, semantic proximity and edge type priority."),
    "c": ("Postgres decision", "We chose PostgreSQL with pgvector for vector search."),
    "d": ("Vector databases", "HNSW indexes give good recall for vector search."),
    "e": ("Feedback", "Reinforcement and decay move the edge weights."),
    "g": ("Decay task", "A periodic Celery task decays weights of edges not traversed."),
    "x": ("Old note", "An archived note about ranking."),
    "f": ("Other", "A note reached only through an archived edge about ranking."),
}
EDGES = [
    ("a", "b", "related", 0.9),
    ("a", "c", "depends_on", 0.6),
    ("a", "d", "derived_from", 0.3),
    ("b", "e", "related", 0.5),
    ("c", "e", "related", 0.4),
    ("e", "g", "related", 0.5),
    ("a", "x", "related", 0.8),
    ("a", "f", "related", 0.7),
]


HASHING = "graphadmin.embeddings.HashingEmbedder"


@pytest.fixture(autouse=True)
def _embedder_marker(request, settings):
    """``@pytest.mark.embedder(PATH)`` runs a test with that embedder configured (the default is MiniLMEmbedder)."""
    marker = request.node.get_closest_marker("embedder")
    if marker:
        settings.EMBEDDER = marker.args[0]


@pytest.fixture
def rg(request, acme_graph, settings):
    """A small ranked graph in acme_graph, with embeddings from the hashing embedder (pinned for the test).

    The ranking tests on it check exact orders that follow from word overlap, so they must not
    depend on a model; a test marked ``@pytest.mark.embedder(PATH)`` gets that embedder instead.

    Returns a dict: graph, nodes by key, edges by 'a>b', types by name.

        a -> b (related, w .9)   a -> c (depends_on, w .6)   a -> d (derived_from, w .3)
        b -> e (related, w .5)   c -> e (related, w .4)      e -> g (related, w .5)
        a -> x (related, w .8; x archived)                   a -> f (related, w .7; the edge archived)
    """
    if not request.node.get_closest_marker("embedder"):
        settings.EMBEDDER = HASHING
    vectors = embed_texts([f"{t}\n{x}" for t, x in TEXTS.values()])
    nodes = {}
    for (key, (title, text)), vec in zip(TEXTS.items(), vectors, strict=True):
        nodes[key] = Node.objects.create(
            graph=acme_graph, key=key, title=title, text=text, embedding=vec, archived=key == "x"
        )
    types = {t.name: t for t in EdgeType.objects.filter(graph=acme_graph)}
    edges = {}
    for s, t, kind, w in EDGES:
        edges[f"{s}>{t}"] = Edge.objects.create(
            graph=acme_graph,
            source=nodes[s],
            target=nodes[t],
            edge_type=types[kind],
            weight=w,
            archived=(s, t) == ("a", "f"),
        )
    return {"graph": acme_graph, "nodes": nodes, "edges": edges, "types": types}


def queued_work(callbacks) -> list:
    """The on-commit callbacks that are work (a task's wake-up), without the connection's and the caches'
    bookkeeping every write or request may register: graphadmin.runtime.timeouts remembering the timeouts
    it set, graphadmin.runtime.hotcache publishing a new version after a cached model changed."""
    bookkeeping = {"graphadmin.runtime.timeouts", "graphadmin.runtime.hotcache"}
    return [c for c in callbacks if getattr(c, "__module__", None) not in bookkeeping]
