"""Feedback fixtures: a session whose injection surfaced b (via a->b) and c (via b->c); a was cut.

The ranking engine writes injections in production; these tests write them with the ORM.
"""

from __future__ import annotations

import pytest

from feedback.models import AgentSession, ContextInjection, InjectionCandidate
from graphadmin.models import Edge


def make_session(graph, external_id, candidates, owner=None):
    """A session (of ``owner``) with one injection; ``candidates`` is a list of (node, edge or None, selected)."""
    session = AgentSession.objects.create(graph=graph, external_id=external_id, owner=owner)
    injection = ContextInjection.objects.create(
        graph=graph, session=session, policy_revision=graph.current_policy(), query="q"
    )
    InjectionCandidate.objects.bulk_create(
        [
            InjectionCandidate(
                injection=injection,
                graph=graph,
                rank=rank,
                selected=selected,
                node=node,
                edge=edge,
                total=1.0 - rank / 10,
            )
            for rank, (node, edge, selected) in enumerate(candidates, start=1)
        ]
    )
    return session


@pytest.fixture
def edges(small_graph):
    """{'ab': edge a->b, 'bc': edge b->c}."""
    n = small_graph
    return {
        "ab": Edge.objects.get(source=n["a"], target=n["b"]),
        "bc": Edge.objects.get(source=n["b"], target=n["c"]),
    }


@pytest.fixture
def surfaced(acme_graph, small_graph, edges, ada):
    """Session 's1' of the agent ada: b via a->b and c via b->c selected; a considered but cut by the budget."""
    n = small_graph
    return make_session(
        acme_graph, "s1", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True), (n["a"], None, False)], ada
    )


@pytest.fixture
def later(acme_graph, small_graph, edges, ada):
    """Session 's2' of ada, surfacing the same as 's1': a second report on the same targets (once per session each)."""
    n = small_graph
    return make_session(
        acme_graph, "s2", [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True), (n["a"], None, False)], ada
    )


def raw_connection():
    """A psycopg connection of its own to the test database (autocommit): another client's locks and reads."""
    import psycopg
    from django.db import connection

    s = connection.settings_dict
    return psycopg.connect(
        host=s["HOST"],
        port=s["PORT"] or None,
        user=s["USER"],
        password=s["PASSWORD"] or None,
        dbname=s["NAME"],
        autocommit=True,
    )


def reload(obj):
    obj.refresh_from_db()
    return obj


@pytest.fixture
def eager_tasks():
    """Run tasks in-process when their on-commit callback fires (API tests without a worker)."""
    from graphadmin.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


def url(graph, external_id, what):
    return f"/api/graphs/{graph.pk}/sessions/{external_id}/{what}/"
