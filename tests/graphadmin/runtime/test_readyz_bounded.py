"""/readyz is fast and honest: each check bounded well under a second, the answer (a
failure too) reused by every caller for HEALTH_CACHE_SECONDS, and a hot table locked is a failed database.

The probes run in a process of their own, configured with a broker that is down (nothing listens on
its port) or a filesystem queue nobody consumes, so each check talks to the real thing it checks.
"""

import json
import os
import subprocess
import sys
import tempfile

import pytest
from django.db import connection

from tests.conftest import ROOT
from tests.feedback.conftest import raw_connection
from tests.resilience import DEAD_REDIS_PORT

PROBE = """
import django, json, time, threading
django.setup()
from django.test import Client
from graphadmin.runtime import health
Client().get('/healthz')  # the URLconf and middleware loaded
health.check_migrations()  # once per process (a deployment migrates before it serves): not what is timed
probes = []
real_probe = health.probe
def counted():
    probes.append(1)
    return real_probe()
health.probe = counted
started = time.monotonic()
first = Client().get('/readyz')
first_s = time.monotonic() - started
started = time.monotonic()
Client().get('/readyz')
cached_s = time.monotonic() - started
times = []
def call():
    t = time.monotonic()
    Client().get('/readyz')
    times.append(time.monotonic() - t)
threads = [threading.Thread(target=call) for _ in range(16)]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps({"status": first.status_code, "body": first.json(), "first_s": first_s, "cached_s": cached_s,
                  "max_s": max(times), "probes": len(probes)}))
"""


def _probe(**env) -> dict:
    full_env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "graphadmin.settings",
        "DATABASE_NAME": connection.settings_dict["NAME"],
        "ALLOWED_HOSTS": "testserver",
        "LOG_LEVEL": "ERROR",
        "HEALTH_CACHE_SECONDS": "30",
        "CACHE_URL": f"filecache://{tempfile.mkdtemp(prefix='readyz-cache-')}",  # no pass another process saw
        **env,
    }
    full_env.setdefault("SECRET_KEY", "test-only-insecure-key")
    done = subprocess.run(
        [sys.executable, "-c", PROBE], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.django_db(transaction=True)
def test_broker_down_fails_within_a_second_and_the_failure_is_cached():
    result = _probe(CELERY_BROKER_URL=f"redis://127.0.0.1:{DEAD_REDIS_PORT}/0", CELERY_RESULT_BACKEND="")
    assert result["status"] == 503
    assert result["body"]["checks"] == {"database": "ok", "migrations": "ok", "broker": "fail", "worker": "fail"}
    assert result["first_s"] < 1.5, result  # was 8-8.5 s
    assert result["cached_s"] < 0.5, result  # the failure is cached: no probe (a request's own cost only)
    assert result["probes"] == 1, result  # 18 calls, 16 of them concurrent: one probe, every other call cached


@pytest.mark.django_db(transaction=True)
def test_a_locked_hot_table_fails_the_database_check_fast(tmp_path):
    with raw_connection() as locker:
        locker.execute("BEGIN")
        locker.execute("LOCK TABLE graphadmin_node IN ACCESS EXCLUSIVE MODE")
        try:
            result = _probe(CELERY_QUEUE_DIR=str(tmp_path / "queue"))
        finally:
            locker.execute("ROLLBACK")
    assert result["status"] == 503
    assert result["body"]["checks"]["database"] == "fail"  # was "ok" after 29.5 s
    assert result["first_s"] < 1.5, result
