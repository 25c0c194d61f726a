"""The audit chain: hashes link, edits and deletions are detected, concurrent appends never fork."""

import threading
from datetime import date

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import ProgrammingError, connection, connections, transaction

from graphadmin import audit
from graphadmin.models import AuditCheckpoint, AuditEvent


def _append_three(org, actor):
    for i in range(3):
        audit.append(org, actor, "test.event", {"i": i, "ratio": 0.1 * i}, scope={"graph": 1})


def test_chain_links_and_verifies(acme, alice):
    _append_three(acme, alice)
    events = list(AuditEvent.objects.filter(organization=acme).order_by("seq"))
    assert [e.seq for e in events] == [1, 2, 3]
    assert events[0].prev_hash == audit.GENESIS
    assert events[1].prev_hash == events[0].hash and events[2].prev_hash == events[1].hash
    assert events[0].actor == "user:alice"
    assert audit.verify(acme).ok and audit.verify(acme).count == 3


def test_chains_are_per_organization(acme, globex, alice, mallory):
    _append_three(acme, alice)
    audit.append(globex, mallory, "test.event", {})
    assert AuditEvent.objects.get(organization=globex).seq == 1


def _bypass_append_only(sql, params):
    """Simulate tampering by someone with table-owner rights: disable the trigger for one statement."""
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute(sql, params)
        cur.execute("SET session_replication_role = DEFAULT")


def test_edited_row_is_detected(acme, alice):
    _append_three(acme, alice)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET payload = %s WHERE organization_id = %s AND seq = 2", ['{"i": 99}', acme.pk]
    )
    result = audit.verify(acme)
    assert not result.ok and result.broken_at == 2 and "hash" in result.reason


def test_deleted_row_is_detected(acme, alice):
    _append_three(acme, alice)
    _bypass_append_only("DELETE FROM graphadmin_auditevent WHERE organization_id = %s AND seq = 2", [acme.pk])
    result = audit.verify(acme)
    assert not result.ok and result.broken_at == 2


def test_deleted_last_row_then_append_is_detected_by_prev_hash(acme, alice):
    _append_three(acme, alice)
    _bypass_append_only("DELETE FROM graphadmin_auditevent WHERE organization_id = %s AND seq = 3", [acme.pk])
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET hash = %s WHERE organization_id = %s AND seq = 2", ["f" * 64, acme.pk]
    )
    assert audit.verify(acme).broken_at == 2


def test_verify_audit_command(acme, alice, capsys):
    _append_three(acme, alice)
    call_command("verify_audit", "--org", "acme")
    assert "acme: ok (3 events)" in capsys.readouterr().out
    _bypass_append_only("DELETE FROM graphadmin_auditevent WHERE organization_id = %s AND seq = 1", [acme.pk])
    with pytest.raises(CommandError, match="acme"):
        call_command("verify_audit", "--org", "acme")
    with pytest.raises(CommandError, match="No organization"):
        call_command("verify_audit", "--org", "nope")


@pytest.mark.django_db(transaction=True)
def test_eight_concurrent_appenders_leave_one_chain(acme, alice):
    errors = []
    barrier = threading.Barrier(8)

    def worker(n):
        try:
            barrier.wait()
            for i in range(5):
                with transaction.atomic():
                    audit.append(acme.pk, f"task:writer-{n}", "test.concurrent", {"writer": n, "i": i})
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    seqs = list(AuditEvent.objects.filter(organization=acme).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 41))
    assert audit.verify(acme).ok


def test_incremental_verification_starts_at_the_checkpoint(acme, alice):
    _append_three(acme, alice)
    assert audit.advance_checkpoint(acme).ok  # full walk: checkpoint at seq 3
    audit.append(acme, alice, "test.event", {"i": 3})
    assert audit.verify(acme, full=False) == audit.Verification(True, 4)
    # Tampering after the checkpoint is caught incrementally.
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET actor = 'x' WHERE organization_id = %s AND seq = 4", [acme.pk]
    )
    assert audit.verify(acme, full=False).broken_at == 4


def test_tampering_with_the_checkpointed_event_is_caught_incrementally(acme, alice):
    _append_three(acme, alice)
    audit.advance_checkpoint(acme)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET hash = %s WHERE organization_id = %s AND seq = 3", ["0" * 64, acme.pk]
    )
    assert audit.verify(acme, full=False).broken_at == 3


def test_tampering_behind_the_checkpoint_needs_the_full_walk(acme, alice):
    _append_three(acme, alice)
    audit.advance_checkpoint(acme)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET payload = '{}' WHERE organization_id = %s AND seq = 1", [acme.pk]
    )
    assert audit.verify(acme, full=False).ok  # by design: pages trust the last full walk
    assert audit.verify(acme).broken_at == 1


def _checkpoint(org):
    return AuditCheckpoint.objects.filter(organization=org).values_list("seq", "hash", "verified_at").first()


def test_a_deleted_tail_is_not_healed(acme, alice, api):
    for i in range(6):
        audit.append(acme, alice, "test.event", {"i": i})
    assert audit.advance_checkpoint(acme).ok
    before = _checkpoint(acme)
    assert before[0] == 6
    # The attacker: table owner, append-only trigger off for the statement, newest 3 events gone.
    _bypass_append_only("DELETE FROM graphadmin_auditevent WHERE organization_id = %s AND seq > 3", [acme.pk])

    full = audit.verify(acme)
    assert not full.ok and full.broken_at == 4 and "before the checkpoint at seq 6" in full.reason
    assert not audit.verify(acme, full=False).ok
    response = api(alice).get("/api/audit/verify/?organization=acme")
    assert response.status_code == 200
    assert response.json()["ok"] is False and response.json()["broken_at"] == 4
    assert not audit.advance_checkpoint(acme).ok
    with pytest.raises(CommandError, match="acme"):
        call_command("verify_audit", "--org", "acme", "--checkpoint")
    assert _checkpoint(acme) == before  # nothing moved it back, nor touched it


def test_a_tail_rewritten_after_the_checkpoint_disagrees_with_it(acme, alice):
    _append_three(acme, alice)
    audit.advance_checkpoint(acme)
    # Delete the checkpointed head and append a new, validly linked seq 3 in its place.
    _bypass_append_only("DELETE FROM graphadmin_auditevent WHERE organization_id = %s AND seq = 3", [acme.pk])
    audit.append(acme, alice, "test.event", {"forged": True})
    result = audit.verify(acme)
    assert not result.ok and result.broken_at == 3 and "checkpoint" in result.reason


def test_get_verify_does_not_write(acme, alice, api):
    _append_three(acme, alice)
    assert api(alice).get("/api/audit/verify/?organization=acme").json()["ok"] is True
    assert _checkpoint(acme) is None
    call_command("verify_audit", "--org", "acme")
    assert _checkpoint(acme) is None
    call_command("verify_audit", "--org", "acme", "--checkpoint")
    assert _checkpoint(acme)[0] == 3


def test_the_checkpoint_only_moves_forward(acme, alice):
    _append_three(acme, alice)
    audit.advance_checkpoint(acme)
    audit.append(acme, alice, "test.event", {"i": 3})
    audit.advance_checkpoint(acme)
    assert _checkpoint(acme)[0] == 4
    for statement in (
        "UPDATE graphadmin_auditcheckpoint SET seq = 3 WHERE organization_id = %s",
        "UPDATE graphadmin_auditcheckpoint SET hash = repeat('0', 64) WHERE organization_id = %s",
        "DELETE FROM graphadmin_auditcheckpoint WHERE organization_id = %s",
    ):
        with pytest.raises(ProgrammingError, match="checkpoint"), transaction.atomic(), connection.cursor() as cur:
            cur.execute(statement, [acme.pk])
    assert _checkpoint(acme)[0] == 4


def _history_partitions():
    with connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "JOIN pg_class p ON p.oid = i.inhparent "
            "WHERE p.relname IN ('feedback_weightchange', 'feedback_weightchangeblock')"
        )
        return sorted(row[0] for row in cur.fetchall())


@pytest.mark.django_db(transaction=True)
def test_truncate_is_refused_on_the_ledgers(acme, alice):
    """Committed rows (a TRUNCATE in the inserting transaction fails earlier, on pending FK checks)."""
    from feedback.retention import ensure_partitions

    _append_three(acme, alice)
    audit.advance_checkpoint(acme)
    created = ensure_partitions(since=date(2020, 1, 1), months_ahead=0)  # new partitions get the refusal too
    try:
        assert "feedback_weightchange_2020_01" in created and "feedback_weightchangeblock_2020_01" in created
        partitions = _history_partitions()
        assert "feedback_weightchange_default" in partitions and "feedback_weightchangeblock_default" in partitions
        tables = [
            "graphadmin_auditevent",
            "graphadmin_auditcheckpoint",
            "feedback_weightchange",
            "feedback_weightchangeblock",
            *partitions,
        ]
        for table in tables:
            with pytest.raises(ProgrammingError, match="TRUNCATE is not allowed"):
                with transaction.atomic(), connection.cursor() as cur:
                    cur.execute(f'TRUNCATE "{table}" CASCADE')
        assert AuditEvent.objects.filter(organization=acme).count() == 3
    finally:
        with connection.cursor() as cur:
            for name in created:  # leave the test database's partitions as they were
                cur.execute(f'DROP TABLE "{name}"')
