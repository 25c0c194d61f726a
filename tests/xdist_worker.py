"""What each pytest-xdist worker keeps to itself, set before Django reads its settings.

Loaded with ``-p tests.xdist_worker`` (pyproject.toml's addopts), so its module code runs before pytest-django
configures Django. Under ``make test`` the suite runs in several processes (``-n``): each has its own test
database (pytest-django names it ``test_<name>_gw<N>``), and here its own Celery queue (a Redis database or a
queue folder of its own, so one process's worker never takes another's tasks), its own cache folder (throttle
counters, readiness records: ``cache.clear()`` in one process must not wipe another's) and its own block of ports
for the processes the resilience tests start (tests/resilience.py). Run without ``-n``, nothing changes.
"""

from __future__ import annotations

import os

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... in a worker; unset otherwise


def index() -> int:
    """This process's worker number (0 when the suite runs in one process)."""
    return int(WORKER[2:]) if WORKER.startswith("gw") else 0


# Redis databases 1-14 for the workers' queues (0: the machine's default; 15: tests/graphadmin/runtime/test_health).
REDIS_DATABASES = range(1, 15)


def _isolate() -> None:
    if not WORKER:
        return
    n = index()
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith("redis://"):
        if n >= len(REDIS_DATABASES):
            raise RuntimeError(f"at most {len(REDIS_DATABASES)} workers share one Redis (-n)")
        base, _, _db = broker.rpartition("/")
        os.environ["CELERY_BROKER_URL"] = f"{base}/{REDIS_DATABASES[n]}"
        if os.environ.get("CELERY_RESULT_BACKEND", "").startswith("redis://"):
            os.environ["CELERY_RESULT_BACKEND"] = os.environ["CELERY_BROKER_URL"]
    queue = os.environ.get("CELERY_QUEUE_DIR")
    if queue:
        os.environ["CELERY_QUEUE_DIR"] = f"{queue.rstrip('/')}-{WORKER}"
    if "CACHE_URL" not in os.environ:
        from pathlib import Path

        root = Path(os.environ.get("GRAPHADMIN_LOCAL_DIR", Path(__file__).resolve().parent.parent / ".local"))
        os.environ["CACHE_URL"] = f"filecache://{root / f'test-cache-{WORKER}'}"


_isolate()
