"""Tasks are thin and safe to redeliver: they re-fetch, call the action, and answer instead of raising."""

import pytest

from feedback.models import UpdateBatch
from feedback.tasks import apply_outcome_task, apply_uses_task, decay_all_task, normalize_all_task
from graphadmin import actions
from graphadmin.models import Edge

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_input_invalid_by_the_time_the_task_runs_is_refused_not_raised(caplog, acme_graph, surfaced, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(archived=True)  # archived between the request and the task
    result = apply_uses_task.apply(
        kwargs={
            "graph_id": acme_graph.pk,
            "external_id": "s1",
            "items": [{"kind": "edge", "id": edges["ab"].pk, "signal": "explicit"}],
        }
    ).get()
    assert result["status"] == "refused" and result["field"] == "items[0].edge"
    assert not UpdateBatch.objects.exists()
    assert any(getattr(r, "feedback_status", None) == "refused" for r in caplog.records)


def test_unknown_graph_and_session_are_statuses(acme_graph):
    assert (
        apply_outcome_task.apply(kwargs={"graph_id": 10**9, "external_id": "x", "outcome": "accepted"}).get()["status"]
        == "unknown_graph"
    )
    assert (
        apply_uses_task.apply(kwargs={"graph_id": acme_graph.pk, "external_id": "x", "items": []}).get()["status"]
        == "unknown_session"
    )


def test_task_actor_is_the_requesting_user_or_the_task(oscar, acme_graph, surfaced):
    apply_outcome_task.apply(
        kwargs={"graph_id": acme_graph.pk, "external_id": "s1", "outcome": "accepted", "user_id": oscar.pk}
    ).get()
    assert UpdateBatch.objects.get().trigger_user == oscar


def test_normalize_all_picks_graphs_in_normalize_mode(alice, acme, acme_graph, edges, eager_tasks):
    other = actions.do_create_graph(acme, "other", "Other", actor=alice)
    actions.do_set_policy(acme_graph, {"ceiling_mode": "normalize"}, actor=alice)
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.25)
    assert normalize_all_task.apply().get() == [acme_graph.pk]
    assert (reload(edges["ab"]).weight, reload(edges["bc"]).weight) == (pytest.approx(0.5), pytest.approx(1.0))
    assert other.pk not in normalize_all_task.apply().get()


def test_decay_all_fans_out_one_task_per_graph(acme_graph, globex_graph, eager_tasks):
    assert decay_all_task.apply().get() == sorted([acme_graph.pk, globex_graph.pk])
