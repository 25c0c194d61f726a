"""How the in-process harnesses (the synthetic world, the demo's history) reach the product.

They call the real API in this process (DRF's client: the real views, middleware and database) and run
the reports' Celery tasks inline (Celery's ``task_always_eager``, set on this process's app only by
:func:`eager_tasks`): the same task function and the same ``feedback.actions`` call as on a worker,
inline after the request commits. The over-HTTP evaluation does not use this module: it talks to a
running server.
"""

from __future__ import annotations

from contextlib import contextmanager

from django.conf import settings
from rest_framework.test import APIClient

from graphadmin.celery import app as celery_app

DECAY_ACTOR = "task:simulation.decay"  # the actor of the decay runs on a simulated clock


@contextmanager
def eager_tasks():
    """Run Celery tasks inline in this process (the simulation only): same tasks, same actions, no worker."""
    conf = celery_app.conf
    before = conf.task_always_eager, conf.task_eager_propagates
    conf.task_always_eager, conf.task_eager_propagates = True, True
    try:
        yield
    finally:
        conf.task_always_eager, conf.task_eager_propagates = before


def api_client(user):
    """An in-process DRF client authenticated as ``user`` (the real views, middleware and database)."""
    hosts = settings.ALLOWED_HOSTS
    host = "localhost" if ("localhost" in hosts or "*" in hosts or not hosts) else hosts[0].lstrip(".")
    client = APIClient(HTTP_HOST=host)
    client.force_authenticate(user)
    return client


def post(client, path: str, body: dict, what: str, ok: tuple[int, ...]):
    """POST ``body`` as JSON; the response, or a RuntimeError naming ``what`` when its status is not in ``ok``."""
    r = client.post(path, body, format="json")
    if r.status_code not in ok:
        raise RuntimeError(f"{what}: {r.status_code} {r.content[:300]!r}")
    return r
