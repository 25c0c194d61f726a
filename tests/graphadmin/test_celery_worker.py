"""The audit verification task runs on a real Celery worker process against the test database."""

import pytest

from graphadmin import audit
from graphadmin.tasks import verify_audit_chains


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_verify_task_runs_on_real_worker(celery_worker_process, acme, alice):
    audit.append(acme, alice, "test.event", {"n": 1})
    result = verify_audit_chains.delay().get(timeout=60)
    assert result["acme"] == {"ok": True, "count": 1, "broken_at": None, "reason": ""}
