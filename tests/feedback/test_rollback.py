"""Rollback: restore before values where unchanged since; conflicts unless forced; never twice; rollbackable itself."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import CommandError, call_command

from feedback import actions
from feedback.actions import ManualValue, UseItem
from feedback.models import UpdateBatch, WeightHistory
from graphadmin.models import AuditEvent, Edge

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_rollback_restores_before_values(oscar, acme_graph, surfaced, edges, small_graph):
    applied = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    result = actions.do_rollback_batch(UpdateBatch.objects.get(pk=applied.batch_id), actor=oscar)
    assert result.status == "applied" and (result.edge_updates, result.node_updates, result.conflicts) == (2, 2, 0)
    for obj in (edges["ab"], edges["bc"], small_graph["b"], small_graph["c"]):
        assert reload(obj).feedback_weight == 0.5
    original = UpdateBatch.objects.get(pk=applied.batch_id)
    assert original.status == "rolled_back" and original.rolled_back_by.pk == result.batch_id
    rollback = UpdateBatch.objects.get(pk=result.batch_id)
    assert rollback.kind == "rollback" and rollback.rollback_of_id == original.pk
    assert set(WeightHistory.objects.filter(batch=rollback).values_list("event", flat=True)) == {"rollback"}
    audit = AuditEvent.objects.get(action="batch.rollback")
    assert audit.payload["rollback_of"] == original.pk and audit.payload["forced"] is False


def test_rows_changed_since_are_conflicts_left_alone(oscar, surfaced, later, edges):
    first = actions.do_record_uses(
        surfaced,
        [UseItem("edge", edges["ab"].pk, "explicit"), UseItem("edge", edges["bc"].pk, "explicit")],
        actor=oscar,
    )
    actions.do_record_uses(later, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)  # ab: 0.55 -> 0.595
    result = actions.do_rollback_batch(UpdateBatch.objects.get(pk=first.batch_id), actor=oscar)
    assert result.conflicts == 1 and result.edge_updates == 1
    assert result.details["conflict_ids"] == {"edge.weight": [edges["ab"].pk]}
    assert reload(edges["ab"]).weight == pytest.approx(0.595)  # left alone
    assert reload(edges["bc"]).weight == 0.5  # restored
    assert UpdateBatch.objects.get(pk=result.batch_id).conflicts == 1


def test_force_overwrites_conflicts_and_is_audited(oscar, surfaced, later, edges):
    first = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    actions.do_record_uses(later, [UseItem("edge", edges["ab"].pk, "negative")], actor=oscar)
    result = actions.do_rollback_batch(UpdateBatch.objects.get(pk=first.batch_id), actor=oscar, force=True)
    assert result.conflicts == 1 and result.edge_updates == 1
    assert reload(edges["ab"]).weight == 0.5
    change = WeightHistory.objects.get(batch_id=result.batch_id)
    assert change.event == "rollback_forced" and change.before == pytest.approx(0.495)
    assert AuditEvent.objects.get(action="batch.rollback").payload["forced"] is True


def test_cannot_roll_back_twice(oscar, surfaced, edges):
    first = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    batch = UpdateBatch.objects.get(pk=first.batch_id)
    actions.do_rollback_batch(batch, actor=oscar)
    with pytest.raises(actions.RollbackRefused):
        actions.do_rollback_batch(batch, actor=oscar)
    assert UpdateBatch.objects.filter(kind="rollback").count() == 1


def test_a_rollback_can_be_rolled_back(oscar, surfaced, edges):
    first = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    undo = actions.do_rollback_batch(UpdateBatch.objects.get(pk=first.batch_id), actor=oscar)
    redo = actions.do_rollback_batch(UpdateBatch.objects.get(pk=undo.batch_id), actor=oscar)
    assert redo.edge_updates == 1
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert UpdateBatch.objects.get(pk=undo.batch_id).status == "rolled_back"


@pytest.mark.parametrize("kind", ["reinforce", "outcome", "decay", "normalize", "manual"])
def test_every_kind_is_rollbackable(kind, oscar, acme_graph, surfaced, edges, small_graph):
    if kind == "reinforce":
        done = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "negative")], actor=oscar)
    elif kind == "outcome":
        done = actions.do_apply_outcome(acme_graph, "s1", "rejected", actor=oscar)
    elif kind == "decay":
        done = actions.do_decay(acme_graph, actor=oscar, now=datetime.now(UTC) + timedelta(days=15), chunk_size=10**9)
    elif kind == "normalize":
        done = actions.do_normalize(acme_graph, actor=oscar, chunk_size=10**9)
    else:
        done = actions.do_set_weights(
            acme_graph,
            [
                ManualValue("edge", edges["ab"].pk, "weight", 0.9),
                ManualValue("node", small_graph["a"].pk, "feedback_weight", 0.2),
            ],
            actor=oscar,
        )
    assert done.status == "applied"
    before = {e.pk: (e.weight, e.feedback_weight) for e in Edge.objects.all()}
    assert before != {edges["ab"].pk: (0.5, 0.5), edges["bc"].pk: (0.5, 0.5)}
    actions.do_rollback_batch(UpdateBatch.objects.get(pk=done.batch_id), actor=oscar)
    assert {e.pk: (e.weight, e.feedback_weight) for e in Edge.objects.all()} == {
        edges["ab"].pk: (0.5, 0.5),
        edges["bc"].pk: (0.5, 0.5),
    }
    assert {n.feedback_weight for n in small_graph["a"].graph.nodes.all()} == {0.5}


def test_rollback_command(oscar, surfaced, later, edges, capsys):
    first = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    actions.do_record_uses(later, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    call_command("rollback", str(first.batch_id))
    assert "1 conflict(s) left alone" in capsys.readouterr().out
    with pytest.raises(CommandError, match="already been rolled back"):
        call_command("rollback", str(first.batch_id), "--force")
    second = UpdateBatch.objects.filter(kind="reinforce").order_by("-id").first()
    call_command("rollback", str(second.pk))
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert AuditEvent.objects.filter(action="batch.rollback", actor="command:rollback").count() == 2
