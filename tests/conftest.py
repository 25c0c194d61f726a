"""The cast every test shares: two organizations, one user per role, one graph each.

acme: alice (admin), oscar (operator), ana (analyst), rita (reviewer); graph ``acme_graph``.
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
from rest_framework.test import APIClient

from graphadmin import services
from graphadmin.models import Edge, EdgeType, Membership, Node, Organization

ROOT = Path(__file__).resolve().parent.parent


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
def mallory(globex):
    return _member(globex, "mallory", "admin")


@pytest.fixture
def acme_graph(acme, alice):
    return services.create_graph(alice, acme, "memory", "Acme memory")


@pytest.fixture
def globex_graph(globex, mallory):
    return services.create_graph(mallory, globex, "memory", "Globex memory")


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
    """A real Celery worker process on the test database, with the configured broker.

    Redis when CELERY_BROKER_URL is set (CI), otherwise kombu's filesystem transport in a
    private folder. Tests using it must use ``transactional_db`` so the worker sees their rows.
    """
    from django.conf import settings
    from django.db import connection

    env = dict(os.environ)
    env["DATABASE_NAME"] = connection.settings_dict["NAME"]
    env.setdefault("SECRET_KEY", "test-only-insecure-key")
    log_path = tmp_path_factory.mktemp("celery-log") / "worker.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "graphadmin", "worker", "--loglevel=INFO", "--concurrency=2",
         "--without-heartbeat", "--without-gossip", "--without-mingle",
         "-Q", ",".join(settings.WORKER_QUEUES)],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 60
    while "ready." not in log_path.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"Celery worker did not start:\n{log_path.read_text()}")
        time.sleep(0.2)
    proc.log_path = log_path
    yield proc
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()

