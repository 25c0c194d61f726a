"""Health checks for process managers and load balancers: ``/healthz`` and ``/readyz``.

- ``GET /healthz``: the process answers (no database, no broker): 200 ``{"status": "ok"}``. A
  supervisor restarts a web process that stops answering it.
- ``GET /readyz``: the service can do its work: the database answers a read of the hot tables
  within a ``lock_timeout`` (a table locked by a migration or a stuck transaction fails the check,
  as it fails agents' context calls), every migration is applied, the broker accepts a connection,
  and a Celery worker answers a ping. 200 when all pass, else 503; a load balancer sends traffic
  only to a ready process, and the load test waits for it before it starts.

Readiness must not hurt the service it reports on. Each check is bounded (``HEALTH_CHECK_TIMEOUT``
seconds, well under a second: the database by PostgreSQL's own timeouts, the broker and the worker
run in a small thread pool and count as failed when they do not answer in time); one probe runs at
a time per process and its answer, pass or fail, is reused for ``HEALTH_CACHE_SECONDS``, so however
many callers ask (unauthenticated, as load balancers are) a process runs at most one probe per
interval and every other caller gets the cached answer at once.

Readiness must not flap. One failed probe of a check that passed a moment ago (a ping the worker
answers late while it starts, a statement slowed by a busy second) is not a fault: a check counts as
failed only when it has not passed for ``HEALTH_FAIL_GRACE`` seconds. The time of each check's last
pass is shared through Django's cache (``CACHES``: a folder on the machine by default, Redis in
production), so every web process answers alike: before, a gunicorn process whose first ping came
late answered 503 a second after its sibling answered 200. Before any check ever passed, a failure is
a failure (not ready yet); a fault that lasts is red within the grace plus ``HEALTH_CACHE_SECONDS``
plus the check's bound.

Both are unauthenticated and say nothing but ok or fail per check name: no versions, hosts, counts
or error texts (the reason of a failure is logged, not answered).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from django.conf import settings
from django.core.cache import cache
from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from graphadmin.celery import app

log = logging.getLogger(__name__)

# A passing migrations check stays passed in this process (a deployment migrates before it starts
# serving), and a worker that answered is not pinged again for a few seconds.
_migrations_ok = False
_worker_ok_until = 0.0
_worker_answered_at = 0.0  # wall-clock time of the last ping this process saw answered
_lock = threading.Lock()
# The last probe's answer (monotonic time, body, status) and the lock one probe at a time holds.
_cached: tuple[float, dict, int] | None = None
_probe_lock = threading.Lock()
# Broker and worker checks run here so a hung connection cannot hold the request (two: one of each).
_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="readyz")
# A table on every agent's path: a probe that cannot read it within the lock timeout fails.
HOT_TABLES = ("graphadmin_node", "graphadmin_edge")


def check_database() -> bool:
    """Read one row of each hot table under a short ``lock_timeout`` and ``statement_timeout``."""
    milliseconds = max(1, int(settings.HEALTH_CHECK_TIMEOUT * 1000))
    with transaction.atomic(using=DEFAULT_DB_ALIAS), connections[DEFAULT_DB_ALIAS].cursor() as cursor:
        cursor.execute(
            "SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
            [f"{milliseconds // 2}ms", f"{milliseconds}ms"],
        )
        for table in HOT_TABLES:
            cursor.execute(f"SELECT 1 FROM {connections[DEFAULT_DB_ALIAS].ops.quote_name(table)} LIMIT 1")
            cursor.fetchall()
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
        conn.ensure_connection(max_retries=0, timeout=settings.HEALTH_CHECK_TIMEOUT)
        return conn.connected


def check_worker() -> bool:
    """A worker answers a control ping (the broadcast mailbox of the configured broker). Not pinged again
    within ``HEALTH_WORKER_CACHE_SECONDS`` of an answer; ``_worker_answered_at`` keeps when it answered
    (the pass shared with other processes is that time, not the time of a probe that did not ping)."""
    global _worker_ok_until, _worker_answered_at
    if time.monotonic() < _worker_ok_until:
        return True
    replies = app.control.ping(timeout=settings.HEALTH_WORKER_TIMEOUT, limit=1)
    if replies:
        with _lock:
            _worker_ok_until = time.monotonic() + settings.HEALTH_WORKER_CACHE_SECONDS
            _worker_answered_at = time.time()
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


# Checks that talk to the broker run in the pool, bounded by a wait; the database bounds itself.
THREADED = {"broker", "worker"}


def _passed_key(name: str) -> str:
    """Cache key of a check's last pass (wall-clock time), per database: the suite's processes and a `make run`
    beside them share the cache folder, not their readiness."""
    return f"readyz:passed:{settings.DATABASES[DEFAULT_DB_ALIAS]['NAME']}:{name}"


def last_passes() -> dict[str, float]:
    """Check name -> wall-clock time of its last pass in any process sharing the cache ({} if unreadable)."""
    try:
        found = cache.get_many([_passed_key(name) for name in READY_CHECKS])
    except Exception:  # the shared cache is a help, never a reason to fail readiness
        log.warning("readiness: the shared cache could not be read", exc_info=True)
        return {}
    return {name: found.get(_passed_key(name), 0.0) for name in READY_CHECKS}


def _remember(passed: list[str], now: float) -> None:
    """Record the passes for every process: now, or for the worker the time it last really answered."""
    times = {name: (_worker_answered_at or now) if name == "worker" else now for name in passed}
    try:
        cache.set_many({_passed_key(name): at for name, at in times.items()}, timeout=None)
    except Exception:
        log.warning("readiness: the shared cache could not be written", exc_info=True)


def _with_grace(checks: dict[str, bool]) -> dict[str, bool]:
    """A failed check that passed within ``HEALTH_FAIL_GRACE`` seconds (here or in another process) counts
    as passed; each pass is recorded for the others."""
    now = time.time()
    passed = [name for name, ok in checks.items() if ok]
    if passed:
        _remember(passed, now)
    if all(checks.values()):
        return checks
    before = last_passes()
    out = {}
    for name, ok in checks.items():
        recent = now - before.get(name, 0.0) < settings.HEALTH_FAIL_GRACE
        if not ok and recent:
            log.warning("readiness check %s failed once; passed %.1f s ago, still ready", name, now - before[name])
        out[name] = ok or recent
    return out


def probe() -> tuple[dict, int]:
    """Run every check once (the broker and worker concurrently, each bounded) -> (body, status)."""
    started = {name: _pool.submit(_run, name, READY_CHECKS[name]) for name in READY_CHECKS if name in THREADED}
    checks = {}
    for name, check in READY_CHECKS.items():
        if name in THREADED:
            continue
        # Without a database the migrations cannot be checked either.
        checks[name] = False if name == "migrations" and not checks.get("database") else _run(name, check)
    deadline = time.monotonic() + max(settings.HEALTH_CHECK_TIMEOUT, settings.HEALTH_WORKER_TIMEOUT)
    for name, future in started.items():
        try:
            checks[name] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout:
            log.warning("readiness check %s did not answer in time", name)
            checks[name] = False
    checks = _with_grace({name: checks[name] for name in READY_CHECKS})
    ready = all(checks.values())
    body = {"status": "ok" if ready else "fail", "checks": {k: "ok" if v else "fail" for k, v in checks.items()}}
    return body, 200 if ready else 503


def cached_probe() -> tuple[dict, int]:
    """The last probe's answer while it is fresh (pass or fail); else one caller probes, the others wait
    for it (at most one probe per process at a time, whatever the number of callers)."""
    global _cached
    if _cached and time.monotonic() - _cached[0] < settings.HEALTH_CACHE_SECONDS:
        return _cached[1], _cached[2]
    with _probe_lock:
        if _cached and time.monotonic() - _cached[0] < settings.HEALTH_CACHE_SECONDS:
            return _cached[1], _cached[2]
        body, status = probe()
        _cached = (time.monotonic(), body, status)
        return body, status


@never_cache
@require_GET
@transaction.non_atomic_requests
def healthz(request):
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
@transaction.non_atomic_requests
def readyz(request):
    body, status = cached_probe()
    return JsonResponse(body, status=status)
