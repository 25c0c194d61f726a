"""The Celery application. Workers scale out on named queues (feedback, decay, embeddings, metrics)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "graphadmin.settings")

app = Celery("graphadmin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
