"""The audit chain: hashes link, edits and deletions are detected, concurrent appends never fork."""

import threading

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection, connections, transaction

from graphadmin import audit
from graphadmin.models import AuditEvent


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
    assert audit.verify(acme).ok  # full walk: checkpoint at seq 3
    audit.append(acme, alice, "test.event", {"i": 3})
    assert audit.verify(acme, full=False) == audit.Verification(True, 4)
    # Tampering after the checkpoint is caught incrementally.
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET actor = 'x' WHERE organization_id = %s AND seq = 4", [acme.pk]
    )
    assert audit.verify(acme, full=False).broken_at == 4


def test_tampering_with_the_checkpointed_event_is_caught_incrementally(acme, alice):
    _append_three(acme, alice)
    audit.verify(acme)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET hash = %s WHERE organization_id = %s AND seq = 3", ["0" * 64, acme.pk]
    )
    assert audit.verify(acme, full=False).broken_at == 3


def test_tampering_behind_the_checkpoint_needs_the_full_walk(acme, alice):
    _append_three(acme, alice)
    audit.verify(acme)
    _bypass_append_only(
        "UPDATE graphadmin_auditevent SET payload = '{}' WHERE organization_id = %s AND seq = 1", [acme.pk]
    )
    assert audit.verify(acme, full=False).ok  # by design: pages trust the last full walk
    assert audit.verify(acme).broken_at == 1
