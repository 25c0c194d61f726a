"""The candidate log (InjectionCandidate) is partitioned by month of its injection's time; expiry drops
whole months past CANDIDATE_LOG_RETENTION_DAYS, audited, run daily by beat (issue 15 item 9: the
candidate log had no retention)."""

from datetime import UTC, datetime

import pytest
from django.conf import settings
from django.db import connection

from feedback import retention
from feedback.models import AgentSession, ContextInjection, InjectionCandidate
from feedback.tasks import maintain_candidate_log_task
from graphadmin.models import AuditEvent


def _partition_of(candidate_id):
    with connection.cursor() as cur:
        cur.execute("SELECT tableoid::regclass::text FROM feedback_injectioncandidate WHERE id = %s", [candidate_id])
        return cur.fetchone()[0]


def _injection(graph, node, when, external_id):
    session = AgentSession.objects.create(graph=graph, external_id=external_id)
    injection = ContextInjection.objects.create(
        graph=graph, session=session, policy_revision=graph.current_policy(), query="q", created_at=when
    )
    candidate = InjectionCandidate.objects.create(
        injection=injection, graph=graph, rank=1, selected=True, node=node, total=1.0, created_at=when
    )
    with connection.cursor() as cur:
        # The foreign-key checks are deferred to commit; a partition with checks pending cannot be dropped in
        # this (the test's) transaction. Expiry runs in a task's own transaction.
        cur.execute("SET CONSTRAINTS ALL IMMEDIATE")
    return injection, candidate


def test_a_context_call_logs_into_this_months_partition(rg, api, ada):
    r = api(ada).post(
        f"/api/graphs/{rg['graph'].pk}/context/", {"session": "s", "query": "ranking weights"}, format="json"
    )
    assert r.status_code == 201, r.content
    injection = ContextInjection.objects.get(pk=r.json()["injection"])
    candidate = InjectionCandidate.objects.filter(injection=injection).first()
    assert candidate.created_at == injection.created_at
    now = datetime.now(UTC)
    assert _partition_of(candidate.pk) == f"feedback_injectioncandidate_{now.year:04d}_{now.month:02d}"


def test_expiry_drops_old_months_whole_and_audits_them(rg, alice):
    retention.ensure_partitions(since=datetime(2025, 3, 1, tzinfo=UTC), parents=tuple(retention.CANDIDATE_LOG))
    node = rg["nodes"]["a"]
    old, old_candidate = _injection(rg["graph"], node, datetime(2025, 3, 15, 12, tzinfo=UTC), "old")
    _recent, recent_candidate = _injection(rg["graph"], node, datetime.now(UTC), "recent")
    assert _partition_of(old_candidate.pk) == "feedback_injectioncandidate_2025_03"

    assert retention.do_expire_candidate_log(0, actor="task:test") == []  # 0 keeps everything
    dropped = {d["partition"]: d for d in retention.do_expire_candidate_log(365, actor="task:test")}
    assert dropped["feedback_injectioncandidate_2025_03"]["rows"] == 1
    assert all(d["ledger"] == "injection_candidates" for d in dropped.values())
    assert not InjectionCandidate.objects.filter(pk=old_candidate.pk).exists()
    assert InjectionCandidate.objects.filter(pk=recent_candidate.pk).exists()
    assert ContextInjection.objects.filter(pk=old.pk).exists()  # the injection itself stays
    event = AuditEvent.objects.filter(action="ledger.expire", payload__ledger="injection_candidates").get(
        payload__partition="feedback_injectioncandidate_2025_03"
    )
    assert event.payload["rows"] == 1 and event.payload["retention_days"] == 365


def test_the_daily_task_keeps_months_ahead_and_expires(rg, settings):
    settings.CANDIDATE_LOG_RETENTION_DAYS = 365
    retention.ensure_partitions(since=datetime(2025, 3, 1, tzinfo=UTC), parents=tuple(retention.CANDIDATE_LOG))
    _injection(rg["graph"], rg["nodes"]["a"], datetime(2025, 3, 15, tzinfo=UTC), "old")
    result = maintain_candidate_log_task()
    assert "feedback_injectioncandidate_2025_03" in {d["partition"] for d in result["dropped"]}
    assert len(retention.existing_partitions(parent="feedback_injectioncandidate")) >= 4


def test_beat_runs_it_daily():
    entry = settings.CELERY_BEAT_SCHEDULE["candidate-log-maintenance-daily"]
    assert entry["task"] == "feedback.maintain_candidate_log"


@pytest.mark.parametrize("setting", ["CANDIDATE_LOG_RETENTION_DAYS", "MAX_CANDIDATES_PER_INJECTION"])
def test_settings_exist(setting):
    assert isinstance(getattr(settings, setting), int)
