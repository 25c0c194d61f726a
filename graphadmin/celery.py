"""The Celery application. Workers scale out on named queues (feedback, decay, embeddings, metrics)."""

import logging
import os

from celery import Celery
from celery.signals import worker_init, worker_ready
from django.conf import settings

from graphadmin.runtime import broker, checks
from graphadmin.runtime.timeouts import worker_connections_use_the_worker_timeout

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")

app = Celery("graphadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _filesystem_broker_folders(**kwargs):
    """The filesystem broker's folders, made once this process has read its Celery configuration (before its first
    send, poll or result): where they are first needed, not when the settings are read."""
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        broker.make_folders(settings.CELERY_QUEUE_DIR)


@worker_ready.connect
def _warn_filesystem_broker_in_production(**kwargs):
    """Say loudly, in the worker's log, that a production configuration runs on the demo broker."""
    if checks.filesystem_broker_in_production(settings.DEBUG, settings.CELERY_BROKER_URL):
        logging.getLogger("graphadmin.celery").warning(
            "%s %s", checks.FILESYSTEM_BROKER_MESSAGE, checks.FILESYSTEM_BROKER_HINT
        )


@worker_init.connect
def _worker_statement_timeout(**_kwargs):
    """A worker's connections run under WORKER_STATEMENT_TIMEOUT_MS (longer than a web request's).

    Connected in the worker's main process before it forks its pool, so every child's connections
    get it as they open.
    """
    worker_connections_use_the_worker_timeout()
