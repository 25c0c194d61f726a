"""Weight history is partitioned by month; expiry drops whole months, audited, never single rows."""

from datetime import datetime, timezone

import pytest
from django.db import DataError, InternalError, ProgrammingError, connection, transaction

from feedback import actions, retention
from feedback.models import UpdateBatch, WeightChange
from graphadmin import audit
from graphadmin.models import AuditEvent


def _partition_of(change_id):
    with connection.cursor() as cur:
        cur.execute("SELECT tableoid::regclass::text FROM feedback_weightchange WHERE id = %s", [change_id])
        return cur.fetchone()[0]


@pytest.fixture
def old_batch(rg, oscar):
    """A manual batch whose history is dated March 2025 (its own monthly partition)."""
    retention.ensure_partitions(since=datetime(2025, 3, 1, tzinfo=timezone.utc))
    edge = rg["edges"]["a>b"]
    result = actions.set_weights(oscar, rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.7)])
    batch = UpdateBatch.objects.get(pk=result.batch_id)
    # Re-date the history the way it would look a year and a half later (bypassing the trigger, test only).
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute(
            "INSERT INTO feedback_weightchange (batch_id, graph_id, edge_id, field, before, after, event, created_at) "
            "SELECT batch_id, graph_id, edge_id, field, before, after, event, '2025-03-15T12:00:00Z' FROM feedback_weightchange WHERE batch_id = %s",
            [batch.pk],
        )
        cur.execute("DELETE FROM feedback_weightchange WHERE batch_id = %s AND created_at > '2026-01-01'", [batch.pk])
        cur.execute("SET session_replication_role = DEFAULT")
    return batch


def test_new_history_lands_in_this_months_partition(rg, oscar):
    edge = rg["edges"]["a>b"]
    result = actions.set_weights(oscar, rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.4)])
    change = WeightChange.objects.get(batch_id=result.batch_id)
    now = datetime.now(timezone.utc)
    assert _partition_of(change.pk) == f"feedback_weightchange_{now.year:04d}_{now.month:02d}"


def test_partitions_refuse_update_and_delete(old_batch):
    for sql in ("DELETE FROM feedback_weightchange_2025_03", "UPDATE feedback_weightchange_2025_03 SET after = 0"):
        with pytest.raises((InternalError, ProgrammingError, DataError), match="append-only"):
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(sql)


def test_expire_drops_whole_old_months_and_audits_them(rg, old_batch, alice):
    recent = actions.set_weights(alice, rg["graph"], [actions.ManualValue("edge", rg["edges"]["a>c"].pk, "weight", 0.3)])
    dropped = {d["partition"]: d for d in retention.expire("task:test", retention_days=365)}
    assert dropped["feedback_weightchange_2025_03"]["rows"] == 1
    assert sum(d["rows"] for d in dropped.values()) == 1  # the other old months were empty
    now = datetime.now(timezone.utc)
    assert f"feedback_weightchange_{now.year:04d}_{now.month:02d}" in retention.existing_partitions()
    assert not WeightChange.objects.filter(batch=old_batch).exists()
    assert WeightChange.objects.filter(batch_id=recent.batch_id).exists()
    event = AuditEvent.objects.get(action="ledger.expire")
    assert event.payload["partition"] == "feedback_weightchange_2025_03" and event.payload["rows"] == 1
    assert audit.verify(rg["graph"].organization).ok
    assert "feedback_weightchange_2025_03" not in retention.existing_partitions()
    # A batch whose history is gone cannot be rolled back (nothing to restore from).
    with pytest.raises(actions.RollbackRefused, match="expired"):
        actions.rollback(alice, old_batch)


def test_no_retention_keeps_everything(old_batch):
    assert retention.expire("task:test", retention_days=0) == []
    assert WeightChange.objects.filter(batch=old_batch).exists()


def test_partitions_are_kept_ahead(db):
    retention.ensure_partitions(months_ahead=3)
    months = sorted(retention.existing_partitions().values())
    now = datetime.now(timezone.utc)
    assert months[-1] > datetime(now.year, now.month, 1).date()
    assert len([m for m in months if m >= datetime(now.year, now.month, 1).date()]) >= 4
