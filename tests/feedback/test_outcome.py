"""Outcome EMA on feedback_weight of every selected node and edge: idempotent, corrections linked."""

import pytest

from feedback import actions
from feedback.models import UpdateBatch, WeightChange
from graphadmin.errors import InputError

from .conftest import make_session, reload

pytestmark = pytest.mark.django_db


def test_accepted_moves_every_selected_node_and_edge(oscar, acme_graph, surfaced, edges, small_graph):
    result = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    assert result.status == "applied"
    assert (result.node_updates, result.edge_updates) == (2, 2)
    # 0.1 * 1.0 + 0.9 * 0.5 = 0.55
    for obj in (edges["ab"], edges["bc"], small_graph["b"], small_graph["c"]):
        assert reload(obj).feedback_weight == pytest.approx(0.55)
    # a was cut by the budget: not surfaced, not moved. Reinforcement weights are not touched.
    assert reload(small_graph["a"]).feedback_weight == 0.5
    assert reload(edges["ab"]).weight == 0.5
    surfaced.refresh_from_db()
    assert surfaced.outcome == "accepted" and surfaced.outcome_at is not None
    assert set(WeightChange.objects.values_list("event", flat=True)) == {"accepted"}


def test_rejected_and_alpha_override(oscar, acme_graph, surfaced, edges):
    actions.do_apply_outcome(acme_graph, "s1", "rejected", actor=oscar, alpha=0.3)
    assert reload(edges["ab"]).feedback_weight == pytest.approx(0.35)  # 0.3 * 0 + 0.7 * 0.5


def test_alpha_out_of_bounds_is_refused(oscar, acme_graph, surfaced):
    with pytest.raises(InputError) as info:
        actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar, alpha=0.9)
    assert list(info.value.errors) == ["ema_alpha"]
    with pytest.raises(InputError) as info:
        actions.do_apply_outcome(acme_graph, "s1", "great", actor=oscar)
    assert list(info.value.errors) == ["outcome"]
    assert not UpdateBatch.objects.exists()


def test_node_surfaced_twice_moves_once(oscar, acme_graph, small_graph, edges):
    n = small_graph
    session = make_session(acme_graph, "s2", [(n["b"], edges["ab"], True), (n["b"], None, True)])
    result = actions.do_apply_outcome(acme_graph, "s2", "accepted", actor=oscar)
    assert (result.node_updates, result.edge_updates) == (1, 1)
    assert reload(n["b"]).feedback_weight == pytest.approx(0.55)
    assert session.pk


def test_same_outcome_twice_applies_once(oscar, acme_graph, surfaced, edges):
    first = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    second = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    assert second.status == "duplicate" and second.batch_id == first.batch_id
    assert reload(edges["ab"]).feedback_weight == pytest.approx(0.55)
    assert UpdateBatch.objects.filter(kind="outcome").count() == 1


def test_different_outcome_later_is_a_correction(oscar, acme_graph, surfaced, edges):
    first = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    second = actions.do_apply_outcome(acme_graph, "s1", "rejected", actor=oscar)
    assert second.status == "applied" and second.batch_id != first.batch_id
    correction = UpdateBatch.objects.get(pk=second.batch_id)
    assert correction.correction_of_id == first.batch_id
    assert correction.details["previous_outcome"] == "accepted"
    assert reload(edges["ab"]).feedback_weight == pytest.approx(0.495)  # 0.1 * 0 + 0.9 * 0.55


def test_retried_report_with_its_key_applies_once_even_after_a_correction(oscar, acme_graph, surfaced, edges):
    first = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar, idempotency_key="report-1")
    actions.do_apply_outcome(acme_graph, "s1", "rejected", actor=oscar, idempotency_key="report-2")
    retried = actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar, idempotency_key="report-1")
    assert retried.status == "duplicate" and retried.batch_id == first.batch_id
    assert UpdateBatch.objects.filter(kind="outcome").count() == 2
    assert reload(edges["ab"]).feedback_weight == pytest.approx(0.495)


def test_a_correction_records_the_replaced_values(oscar, acme_graph, surfaced, edges, small_graph):
    """One UPDATE with RETURNING old.*: each change's before is the value it replaced."""
    actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    result = actions.do_apply_outcome(acme_graph, "s1", "rejected", actor=oscar)  # a correction, from 0.55
    changes = list(WeightChange.objects.filter(batch_id=result.batch_id))
    ids = [edges["ab"].pk, edges["bc"].pk, small_graph["b"].pk, small_graph["c"].pk]
    assert sorted(c.edge_id or c.node_id for c in changes) == sorted(ids)
    assert all(c.before == pytest.approx(0.55) and c.after == pytest.approx(0.495) for c in changes)  # 0.9 * 0.55
