"""Reinforcement on use events: w += lr * (1 - w); negative: w -= rate * w; unused: unchanged."""

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import UpdateBatch, UseEvent, WeightChange
from graphadmin.errors import InputError
from graphadmin.models import AuditEvent

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_explicit_use_reinforces_edge_weight_and_node_feedback_weight(oscar, surfaced, edges, small_graph):
    result = actions.do_record_uses(
        surfaced,
        [UseItem("edge", edges["ab"].pk, "explicit"), UseItem("node", small_graph["c"].pk, "explicit")],
        actor=oscar,
    )
    assert result.status == "applied"
    # c was surfaced through b->c: its use credits that edge too (credit to the path).
    assert (result.edge_updates, result.node_updates, result.triplet_embeddings) == (2, 1, 0)
    assert reload(edges["ab"]).weight == pytest.approx(0.55)  # 0.5 + 0.1 * (1 - 0.5)
    assert reload(small_graph["c"]).feedback_weight == pytest.approx(0.55)
    assert reload(edges["bc"]).weight == pytest.approx(0.55)
    # Surfaced but not reported: unchanged.
    assert reload(small_graph["b"]).feedback_weight == 0.5
    assert reload(edges["ab"]).feedback_weight == 0.5


def test_repeated_use_has_diminishing_steps(oscar, surfaced, edges, acme_graph, small_graph):
    from .conftest import make_session

    again = make_session(acme_graph, "s2", [(small_graph["b"], edges["ab"], True)])
    for session in (surfaced, again):
        actions.do_record_uses(session, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    assert reload(edges["ab"]).weight == pytest.approx(0.595)  # 0.55 + 0.1 * 0.45


def test_the_same_use_reported_again_in_a_session_moves_nothing_more(oscar, surfaced, edges, small_graph):
    first = actions.do_record_uses(surfaced, [UseItem("node", small_graph["c"].pk, "explicit")], actor=oscar)
    again = actions.do_record_uses(surfaced, [UseItem("node", small_graph["c"].pk, "explicit")], actor=oscar)
    assert first.status == "applied" and again.status == "already_credited"
    assert reload(small_graph["c"]).feedback_weight == pytest.approx(0.55)
    assert reload(edges["bc"]).weight == pytest.approx(0.55)
    assert UseEvent.objects.filter(session=surfaced).count() == 2  # the node and its path edge, once each


def test_negative_signal_lowers_weight(oscar, surfaced, edges):
    actions.do_record_uses(surfaced, [UseItem("edge", edges["bc"].pk, "negative")], actor=oscar)
    assert reload(edges["bc"]).weight == pytest.approx(0.45)  # 0.5 - 0.1 * 0.5


def test_learning_rate_override_within_bounds(oscar, surfaced, edges):
    actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar, learning_rate=0.2)
    assert reload(edges["ab"]).weight == pytest.approx(0.6)
    with pytest.raises(InputError) as info:
        actions.do_record_uses(surfaced, [UseItem("edge", edges["bc"].pk, "explicit")], actor=oscar, learning_rate=0.9)
    assert list(info.value.errors) == ["learning_rate"]


def test_batch_history_and_audit_are_written(oscar, surfaced, edges):
    result = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    batch = UpdateBatch.objects.get(pk=result.batch_id)
    assert (batch.kind, batch.status, batch.trigger_user, batch.trigger_session) == (
        "reinforce",
        "applied",
        oscar,
        surfaced,
    )
    assert batch.finished_at is not None and batch.duration_ms > 0
    change = WeightChange.objects.get(batch=batch)
    event = UseEvent.objects.get(session=surfaced)
    assert (change.edge_id, change.field, change.before, change.event, change.use_event_id) == (
        edges["ab"].pk,
        "weight",
        0.5,
        "explicit",
        event.pk,
    )
    assert change.after == pytest.approx(0.55)
    audit = AuditEvent.objects.get(action="graph.feedback")
    assert audit.payload["batch"] == batch.pk and audit.actor == "user:oscar"


def test_idempotency_key_applies_once(oscar, surfaced, edges):
    first = actions.do_record_uses(
        surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar, idempotency_key="k1"
    )
    again = actions.do_record_uses(
        surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar, idempotency_key="k1"
    )
    assert again.status == "duplicate" and again.batch_id == first.batch_id
    assert reload(edges["ab"]).weight == pytest.approx(0.55)
    assert UseEvent.objects.count() == 1


def test_same_target_with_two_signals_is_refused_and_nothing_written(oscar, surfaced, edges):
    with pytest.raises(InputError) as info:
        actions.do_record_uses(
            surfaced,
            [UseItem("edge", edges["ab"].pk, "explicit"), UseItem("edge", edges["ab"].pk, "negative")],
            actor=oscar,
        )
    assert list(info.value.errors) == ["items[1]"]
    assert not UpdateBatch.objects.exists() and not UseEvent.objects.exists()


def test_weight_already_at_one_writes_no_change_row(oscar, surfaced, edges):
    type(edges["ab"]).objects.filter(pk=edges["ab"].pk).update(weight=1.0)
    result = actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    assert result.edge_updates == 0 and not WeightChange.objects.exists()
