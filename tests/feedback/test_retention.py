"""Weight history is partitioned by month; expiry drops whole months, audited, never single rows."""

from datetime import UTC, datetime

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
    retention.ensure_partitions(since=datetime(2025, 3, 1, tzinfo=UTC))
    edge = rg["edges"]["a>b"]
    result = actions.do_set_weights(rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.7)], actor=oscar)
    batch = UpdateBatch.objects.get(pk=result.batch_id)
    # Re-date the history the way it would look a year and a half later (bypassing the trigger, test only).
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute(
            "INSERT INTO feedback_weightchange (batch_id, graph_id, edge_id, field, before, after, event, created_at) "
            "SELECT batch_id, graph_id, edge_id, field, before, after, event, '2025-03-15T12:00:00Z'"
            " FROM feedback_weightchange WHERE batch_id = %s",
            [batch.pk],
        )
        cur.execute("DELETE FROM feedback_weightchange WHERE batch_id = %s AND created_at > '2026-01-01'", [batch.pk])
        cur.execute("SET session_replication_role = DEFAULT")
    return batch


def test_new_history_lands_in_this_months_partition(rg, oscar):
    edge = rg["edges"]["a>b"]
    result = actions.do_set_weights(rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.4)], actor=oscar)
    change = WeightChange.objects.get(batch_id=result.batch_id)
    now = datetime.now(UTC)
    assert _partition_of(change.pk) == f"feedback_weightchange_{now.year:04d}_{now.month:02d}"


def test_partitions_refuse_update_and_delete(old_batch):
    for sql in ("DELETE FROM feedback_weightchange_2025_03", "UPDATE feedback_weightchange_2025_03 SET after = 0"):
        with pytest.raises((InternalError, ProgrammingError, DataError), match="append-only"):
            with transaction.atomic(), connection.cursor() as cur:
                cur.execute(sql)


def test_expire_drops_whole_old_months_and_audits_them(rg, old_batch, alice):
    recent = actions.do_set_weights(
        rg["graph"], [actions.ManualValue("edge", rg["edges"]["a>c"].pk, "weight", 0.3)], actor=alice
    )
    dropped = {d["partition"]: d for d in retention.do_expire_history(365, actor="task:test")}
    assert dropped["feedback_weightchange_2025_03"]["rows"] == 1
    assert sum(d["rows"] for d in dropped.values()) == 1  # the other old months were empty
    now = datetime.now(UTC)
    assert f"feedback_weightchange_{now.year:04d}_{now.month:02d}" in retention.existing_partitions()
    assert not WeightChange.objects.filter(batch=old_batch).exists()
    assert WeightChange.objects.filter(batch_id=recent.batch_id).exists()
    event = AuditEvent.objects.get(action="ledger.expire")
    assert event.payload["partition"] == "feedback_weightchange_2025_03" and event.payload["rows"] == 1
    assert audit.verify(rg["graph"].organization).ok
    assert "feedback_weightchange_2025_03" not in retention.existing_partitions()
    # A batch whose history is gone cannot be rolled back (nothing to restore from).
    with pytest.raises(actions.RollbackRefused, match="expired"):
        actions.do_rollback_batch(old_batch, actor=alice)


def test_no_retention_keeps_everything(old_batch):
    assert retention.do_expire_history(0, actor="task:test") == []
    assert WeightChange.objects.filter(batch=old_batch).exists()


def test_partitions_are_kept_ahead(db):
    retention.ensure_partitions(months_ahead=3)
    months = sorted(retention.existing_partitions().values())
    now = datetime.now(UTC)
    assert months[-1] > datetime(now.year, now.month, 1).date()
    assert len([m for m in months if m >= datetime(now.year, now.month, 1).date()]) >= 4


def test_block_history_expires_by_month_like_rows(rg, oscar):
    """Decay's block history lives in its own monthly partitions; expiry drops them the same way."""
    from datetime import timedelta

    from feedback.models import WeightChangeBlock, WeightHistory

    retention.ensure_partitions(since=datetime(2025, 3, 1, tzinfo=UTC))
    result = actions.do_decay(rg["graph"], actor=oscar, now=datetime.now(UTC) + timedelta(days=15))
    assert result.status == "applied"
    block = WeightChangeBlock.objects.get(batch_id=result.batch_id)
    with connection.cursor() as cur:
        cur.execute("SELECT tableoid::regclass::text FROM feedback_weightchangeblock WHERE id = %s", [block.pk])
        now = datetime.now(UTC)
        assert cur.fetchone()[0] == f"feedback_weightchangeblock_{now.year:04d}_{now.month:02d}"
        with pytest.raises((InternalError, ProgrammingError, DataError), match="append-only"):
            with transaction.atomic():
                cur.execute("UPDATE feedback_weightchangeblock SET after = before")
        cur.execute("SET session_replication_role = replica")  # re-date it (test only)
        cur.execute(
            "INSERT INTO feedback_weightchangeblock (batch_id, graph_id, target, field, event, created_at, id_min,"
            " id_max, size, ids, before, after) "
            "SELECT batch_id, graph_id, target, field, event, '2025-03-15T12:00:00Z', id_min, id_max, size, ids,"
            " before, after "
            "FROM feedback_weightchangeblock WHERE id = %s",
            [block.pk],
        )
        cur.execute("DELETE FROM feedback_weightchangeblock WHERE id = %s", [block.pk])
        cur.execute("SET session_replication_role = DEFAULT")
    dropped = {d["partition"]: d for d in retention.do_expire_history(365, actor="task:test")}
    gone = dropped["feedback_weightchangeblock_2025_03"]
    assert gone["rows"] == 1 and gone["ledger"] == "weight_change_blocks"
    assert not WeightHistory.objects.filter(batch_id=result.batch_id).exists()
    assert AuditEvent.objects.get(action="ledger.expire").payload["ledger"] == "weight_change_blocks"
    with pytest.raises(actions.RollbackRefused, match="expired"):
        actions.do_rollback_batch(UpdateBatch.objects.get(pk=result.batch_id), actor=oscar)
