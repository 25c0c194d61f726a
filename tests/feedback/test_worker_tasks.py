"""Each task family runs on a real Celery worker process against the test database."""

from datetime import UTC, datetime, timedelta

import pytest

from feedback.models import DailyMetric, UpdateBatch
from feedback.tasks import apply_outcome_task, decay_graph_task, rollup_metrics_task
from graphadmin.models import Edge

from .conftest import make_session

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_outcome_on_worker(celery_worker_process, oscar, acme_graph, small_graph):
    n = small_graph
    edge = Edge.objects.get(source=n["a"], target=n["b"])
    make_session(acme_graph, "w1", [(n["b"], edge, True)])
    result = apply_outcome_task.apply_async(
        kwargs={
            "graph_id": acme_graph.pk,
            "external_id": "w1",
            "outcome": "accepted",
            "idempotency_key": "w1-report",
            "user_id": oscar.pk,
        }
    ).get(timeout=60)
    assert result["status"] == "applied" and (result["edge_updates"], result["node_updates"]) == (1, 1)
    edge.refresh_from_db()
    assert edge.feedback_weight == pytest.approx(0.55)
    batch = UpdateBatch.objects.get(pk=result["batch_id"])
    assert batch.trigger_user == oscar and batch.idempotency_key == "w1-report"


def test_decay_on_worker(celery_worker_process, acme_graph, small_graph):
    Edge.objects.update(created_at=datetime.now(UTC) - timedelta(days=30))
    result = decay_graph_task.delay(acme_graph.pk).get(timeout=60)
    assert result["status"] == "applied" and result["edge_updates"] == 2
    assert sorted(Edge.objects.values_list("weight", flat=True)) == pytest.approx([0.475, 0.475])
    assert decay_graph_task.delay(acme_graph.pk).get(timeout=60)["status"] == "duplicate"
    assert UpdateBatch.objects.get(kind="decay").trigger_task == "task:feedback.decay"


def test_metrics_on_worker(celery_worker_process, acme_graph, small_graph):
    n = small_graph
    make_session(acme_graph, "m1", [(n["b"], None, True), (n["c"], None, False)])
    today = datetime.now(UTC).date().isoformat()
    result = rollup_metrics_task.delay(acme_graph.pk, today).get(timeout=60)
    assert result["status"] == "applied"
    row = DailyMetric.objects.get(graph=acme_graph)
    assert row.data["scores"]["count"] == 2 and row.data["top_used"]["sessions"] == 1
