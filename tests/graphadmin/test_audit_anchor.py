"""Anchors of the audit chains outside the database, and the one-event-per-batch check of a full verify.

The attacker here owns the tables: triggers off (``session_replication_role = replica``), every event
rewritten and rehashed, the checkpoint moved along. The chain then verifies on its own; only the anchor
(a head kept in an append-only file the database cannot reach) tells.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from feedback.actions import do_set_weights
from feedback.models import UpdateBatch
from feedback.rules import ManualValue
from graphadmin import anchor, audit
from graphadmin.models import AuditEvent, Edge
from graphadmin.tasks import verify_audit_chains
from tests.conftest import ROOT, stop


@pytest.fixture
def anchors(settings, tmp_path):
    """A fresh anchor file for the test."""
    settings.AUDIT_ANCHOR_FILE = str(tmp_path / "anchors.jsonl")
    return tmp_path / "anchors.jsonl"


def _as_owner(statement, params=()):
    with connection.cursor() as cur:
        cur.execute("SET session_replication_role = replica")
        cur.execute(statement, params)
        cur.execute("SET session_replication_role = DEFAULT")


def _rewrite_and_rehash(org, seq_from: int, payload: dict) -> None:
    """Replace the payload of every event from ``seq_from`` on and recompute the hashes and the checkpoint."""
    events = list(AuditEvent.objects.filter(organization=org).order_by("seq"))
    prev = events[seq_from - 2].hash if seq_from > 1 else audit.GENESIS
    for event in events[seq_from - 1 :]:
        new_hash = audit.compute_hash(
            prev, event.seq, event.created_at, event.actor, event.action, event.scope, payload
        )
        _as_owner(
            "UPDATE graphadmin_auditevent SET payload = %s, prev_hash = %s, hash = %s WHERE id = %s",
            [json.dumps(payload), prev, new_hash, event.pk],
        )
        prev = new_hash
    _as_owner("UPDATE graphadmin_auditcheckpoint SET hash = %s WHERE organization_id = %s", [prev, org.pk])


def test_heads_are_appended_as_json_lines(acme, globex, alice, mallory, anchors):
    for i in range(3):
        audit.append(acme, alice, "test.event", {"i": i})
    audit.append(globex, mallory, "test.event", {})
    results = audit.anchor_heads()
    assert results["acme"].ok and results["globex"].ok
    lines = [json.loads(line) for line in anchors.read_text().splitlines()]
    head = AuditEvent.objects.get(organization=acme, seq=3)
    assert lines[0] == {
        "database": connection.settings_dict["NAME"],
        "organization": acme.pk,
        "slug": "acme",
        "seq": 3,
        "hash": head.hash,
        "time": head.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "anchored_at": lines[0]["anchored_at"],
    }
    assert (lines[1]["slug"], lines[1]["seq"]) == ("globex", 1)
    # Nothing moved: nothing more to anchor. A new event: one more line, for acme only.
    audit.anchor_heads()
    assert len(anchors.read_text().splitlines()) == 2
    audit.append(acme, alice, "test.event", {"i": 3})
    audit.anchor_heads()
    assert [json.loads(line)["seq"] for line in anchors.read_text().splitlines()] == [3, 1, 4]
    assert anchor.last_anchor(acme.pk).seq == 4


def test_anchors_go_to_a_log_sink(acme, alice, settings, caplog):
    settings.AUDIT_ANCHOR_FILE = ""
    settings.AUDIT_ANCHOR_LOGGER = "audit.anchors"
    audit.append(acme, alice, "test.event", {})
    with caplog.at_level("INFO", logger="audit.anchors"):
        audit.anchor_heads()
    [record] = [r for r in caplog.records if r.name == "audit.anchors"]
    assert json.loads(record.getMessage())["seq"] == 1 and record.organization == "acme"


def test_the_file_is_only_appended_to(acme, alice, anchors):
    anchors.write_text("an earlier line\n")
    audit.append(acme, alice, "test.event", {})
    audit.anchor_heads()
    assert anchors.read_text().startswith("an earlier line\n")
    assert oct(anchors.stat().st_mode & 0o777) in ("0o644", "0o600", "0o664")


def test_a_rewritten_and_rehashed_chain_is_caught_by_its_anchor(acme, alice, anchors, api):
    for i in range(4):
        audit.append(acme, alice, "test.event", {"i": i})
    assert audit.anchor_heads()["acme"].ok  # checkpoint and anchor at seq 4

    _rewrite_and_rehash(acme, 2, {"i": "forged"})

    # Without the anchor the forgery holds: every link, and the checkpoint, agree.
    os.replace(anchors, anchors.with_suffix(".away"))
    assert audit.verify(acme).ok
    os.replace(anchors.with_suffix(".away"), anchors)

    full = audit.verify(acme)
    assert not full.ok and full.broken_at == 4 and "anchor" in full.reason and "rewritten" in full.reason
    assert not audit.verify(acme, full=False).ok  # the dashboard badge
    body = api(alice).get("/api/audit/verify/?organization=acme").json()
    assert body["ok"] is False and body["broken_at"] == 4
    with pytest.raises(CommandError, match="acme"):
        call_command("verify_audit", "--org", "acme")
    # And the forged head is never anchored.
    with pytest.raises(CommandError, match="acme"):
        call_command("anchor_audit", "--org", "acme")
    assert len(anchors.read_text().splitlines()) == 1


def test_a_chain_cut_before_its_anchor_is_caught(acme, alice, anchors):
    for i in range(3):
        audit.append(acme, alice, "test.event", {"i": i})
    audit.anchor_heads()
    # Everything gone, checkpoint too: as if the organization had never acted.
    _as_owner("DELETE FROM graphadmin_auditevent WHERE organization_id = %s", [acme.pk])
    _as_owner("DELETE FROM graphadmin_auditcheckpoint WHERE organization_id = %s", [acme.pk])
    result = audit.verify(acme)
    assert not result.ok and result.broken_at == 1 and "ends before the anchor of seq 3" in result.reason
    assert not audit.verify(acme, full=False).ok


def test_anchors_of_another_database_do_not_count(acme, alice, anchors):
    audit.append(acme, alice, "test.event", {})
    line = {"database": "elsewhere", "organization": acme.pk, "seq": 9, "hash": "0" * 64}
    anchors.write_text(json.dumps({**line, "time": "", "anchored_at": ""}) + "\nnot json\n")
    assert anchor.last_anchor(acme.pk) is None
    assert audit.verify(acme).ok


def test_an_unreadable_anchor_file_is_no_pass(acme, alice, anchors):
    audit.append(acme, alice, "test.event", {})
    anchors.mkdir()  # exists, but cannot be read as a file
    result = audit.verify(acme)
    assert not result.ok and "anchor file cannot be read" in result.reason
    assert not audit.verify(acme, full=False).ok


def _weights(graph, small_graph, alice):
    edge = Edge.objects.filter(graph=graph).order_by("id").first()
    return do_set_weights(graph, [ManualValue("edge", edge.pk, "weight", 0.7)], actor=alice, reason="test")


def test_every_batch_has_exactly_one_audit_event(acme, acme_graph, small_graph, alice, anchors):
    result = _weights(acme_graph, small_graph, alice)
    assert audit.verify(acme).ok
    batch = UpdateBatch.objects.get(pk=result.batch_id)

    # A batch written past the write path has no event.
    stray = UpdateBatch.objects.create(graph=acme_graph, kind="manual", started_at=datetime.now(UTC))
    missing = audit.verify(acme)
    assert not missing.ok and f"batch {stray.pk} (manual): 0" in missing.reason
    assert not audit.anchor_heads()["acme"].ok  # nor is its chain anchored
    with pytest.raises(CommandError, match="acme"):
        call_command("verify_audit", "--org", "acme")
    _as_owner("DELETE FROM feedback_updatebatch WHERE id = %s", [stray.pk])
    assert audit.verify(acme).ok

    # A second event naming the same batch.
    audit.append(acme, alice, "graph.weights.set", {"batch": batch.pk, "kind": "manual"})
    twice = audit.verify(acme)
    assert not twice.ok and f"batch {batch.pk} (manual): 2" in twice.reason


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_celery_beat_and_a_real_worker_write_the_anchors(celery_worker_process, acme, alice, tmp_path):
    """beat schedules ``verify_audit_chains`` (every second here), the session's worker runs it, and the head
    lands in the session's anchor file (the worker inherited AUDIT_ANCHOR_FILE)."""
    path = anchor.anchor_file()
    audit.append(acme, alice, "test.event", {"n": 1})
    audit.append(acme, alice, "test.event", {"n": 2})
    env = {
        **os.environ,
        "DATABASE_NAME": connection.settings_dict["NAME"],
        "AUDIT_ANCHOR_INTERVAL": "1",
        "SECRET_KEY": os.environ.get("SECRET_KEY", "test-only-insecure-key"),
    }
    log_path = tmp_path / "beat.log"
    with open(log_path, "w") as log:
        beat = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "graphadmin",
                "beat",
                "--loglevel=INFO",
                f"--schedule={tmp_path / 'schedule'}",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while anchor.last_anchor(acme.pk) is None:
                assert beat.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, log_path.read_text()
                time.sleep(0.3)
        finally:
            stop(beat)
    last = anchor.last_anchor(acme.pk)
    assert (last.seq, last.hash) == (2, AuditEvent.objects.get(organization=acme, seq=2).hash)
    assert str(path) == os.environ["AUDIT_ANCHOR_FILE"]
    # The task on the worker, called directly, reports the chain sound (nothing new to anchor).
    assert verify_audit_chains.delay().get(timeout=60)["acme"]["ok"] is True
