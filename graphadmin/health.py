"""Health checks for process managers and load balancers: ``/healthz`` and ``/readyz``.

- ``GET /healthz``: the process answers (no database, no broker): 200 ``{"status": "ok"}``. A
  supervisor restarts a web process that stops answering it.
- ``GET /readyz``: the service can do its work: the database answers, every migration is applied,
  the broker accepts a connection, and a Celery worker answers a ping (its heartbeat, within
  ``HEALTH_WORKER_TIMEOUT`` seconds). 200 when all pass, else 503; a load balancer sends traffic
  only to a ready process, and the load test waits for it before it starts.

Both are unauthenticated and say nothing but ok or fail per check name: no versions, hosts, counts
or error texts (the reason of a failure is logged, not answered).
"""

from __future__ import annotations

import logging
import threading
import time

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from graphadmin.celery import app

log = logging.getLogger(__name__)

# A passing migrations check stays passed in this process (a deployment migrates before it starts
# serving), and a worker that answered is not pinged again for a few seconds, so frequent probes
# from several load balancers cost neither a migration-graph load nor a broadcast each time.
_migrations_ok = False
_worker_ok_until = 0.0
_lock = threading.Lock()


def check_database() -> bool:
    with connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute("SELECT 1")
        return cursor.fetchone() == (1,)


def check_migrations() -> bool:
    global _migrations_ok
    if _migrations_ok:
        return True
    connection = connections[DEFAULT_DB_ALIAS]
    executor = MigrationExecutor(connection)
    pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    _migrations_ok = not pending
    return _migrations_ok


def check_broker() -> bool:
    with app.connection_for_write() as conn:
        conn.ensure_connection(max_retries=1, timeout=settings.HEALTH_WORKER_TIMEOUT)
        return conn.connected


def check_worker() -> bool:
    """A worker answers a control ping (the broadcast mailbox of the configured broker)."""
    global _worker_ok_until
    if time.monotonic() < _worker_ok_until:
        return True
    replies = app.control.ping(timeout=settings.HEALTH_WORKER_TIMEOUT, limit=1)
    if replies:
        with _lock:
            _worker_ok_until = time.monotonic() + settings.HEALTH_WORKER_CACHE_SECONDS
    return bool(replies)


READY_CHECKS = {
    "database": check_database,
    "migrations": check_migrations,
    "broker": check_broker,
    "worker": check_worker,
}


def _run(name, check) -> bool:
    try:
        return bool(check())
    except Exception:  # a health check reports any failure as "fail"; the reason goes to the log only
        log.warning("readiness check %s failed", name, exc_info=True)
        return False


@never_cache
@require_GET
@transaction.non_atomic_requests
def healthz(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
@transaction.non_atomic_requests
def readyz(request):
    checks = {}
    for name, check in READY_CHECKS.items():
        # Without a database the migrations cannot be checked either.
        if name == "migrations" and not checks.get("database"):
            checks[name] = False
            continue
        checks[name] = _run(name, check)
    ready = all(checks.values())
    body = {"status": "ok" if ready else "fail", "checks": {k: "ok" if v else "fail" for k, v in checks.items()}}
    return JsonResponse(body, status=200 if ready else 503)
