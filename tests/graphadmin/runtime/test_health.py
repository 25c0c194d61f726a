"""/healthz and /readyz: unauthenticated, ok or fail per check, nothing else; readiness against a real worker.

The failing cases run the view in a separate process configured with a broker that has no worker
(another Redis database, or a fresh filesystem queue) or no broker at all, so every check talks to
the real thing it checks.
"""

import json
import os
import subprocess
import sys

import pytest
from django.db import connection

from tests.conftest import ROOT

CHECKS = {"database", "migrations", "broker", "worker"}


def test_healthz_answers_without_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]


def test_healthz_refuses_post(client):
    assert client.post("/healthz").status_code == 405


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_readyz_with_a_running_worker(client, celery_worker_process):
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json() == {"status": "ok", "checks": dict.fromkeys(CHECKS, "ok")}


def _readyz_in_process(tmp_path, **env) -> tuple[int, dict]:
    code = (
        "import django, json; django.setup(); from django.test import Client; "
        "r = Client().get('/readyz'); print(json.dumps([r.status_code, r.json()]))"
    )
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "graphadmin.settings",
        "DATABASE_NAME": connection.settings_dict["NAME"],
        "ALLOWED_HOSTS": "testserver",
        "HEALTH_WORKER_TIMEOUT": "0.5",
        "LOG_LEVEL": "ERROR",
        **env,
    }
    full_env.setdefault("SECRET_KEY", "test-only-insecure-key")
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    status, body = json.loads(done.stdout.strip().splitlines()[-1])
    return status, body


@pytest.mark.django_db(transaction=True)
def test_readyz_without_a_worker(tmp_path):
    """A broker nobody consumes: the broker passes, the worker check fails, 503, and no reason is given."""
    if os.environ.get("CELERY_BROKER_URL", "").startswith("redis://"):
        env = {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/15"}
    else:
        env = {"CELERY_QUEUE_DIR": str(tmp_path / "queue")}
    status, body = _readyz_in_process(tmp_path, **env)
    assert status == 503
    assert body == {
        "status": "fail",
        "checks": {"database": "ok", "migrations": "ok", "broker": "ok", "worker": "fail"},
    }


@pytest.mark.django_db(transaction=True)
def test_readyz_without_a_broker(tmp_path):
    """Nothing listens on the broker's port: broker and worker fail; the database still passes."""
    status, body = _readyz_in_process(
        tmp_path, CELERY_BROKER_URL="redis://127.0.0.1:9/0", CELERY_RESULT_BACKEND="redis://127.0.0.1:9/0"
    )
    assert status == 503
    assert body["checks"] == {"database": "ok", "migrations": "ok", "broker": "fail", "worker": "fail"}
    assert set(body) == {"status", "checks"}
