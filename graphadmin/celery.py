"""The Celery application. Workers scale out on named queues (feedback, decay, embeddings, metrics)."""

import os

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")

app = Celery("graphadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _worker_statement_timeout(**_kwargs):
    """A worker's connections run under WORKER_STATEMENT_TIMEOUT_MS (longer than a web request's).

    Connected in the worker's main process before it forks its pool, so every child's connections
    get it as they open.
    """
    from django.db.backends.signals import connection_created

    connection_created.connect(_on_worker_connection, dispatch_uid="graphadmin-worker-statement-timeout")


def _on_worker_connection(sender, connection, **_kwargs):
    from django.conf import settings

    from graphadmin.middleware import set_statement_timeout

    set_statement_timeout(settings.WORKER_STATEMENT_TIMEOUT_MS, connection)
