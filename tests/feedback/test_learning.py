"""Does the graph learn? The simulator at a small scale: learning beats the frozen policy on the same questions.

Transactional: the reports are enqueued on commit and run eagerly (feedback.simulation.eager_tasks).
"""

import pytest
from django.contrib.auth import get_user_model

from feedback import simulation
from feedback.demo import ensure_demo, fill_demo_history
from feedback.models import AgentSession, DailyMetric, UpdateBatch
from graphadmin.models import AuditEvent, Membership


@pytest.mark.django_db(transaction=True)
def test_learning_beats_the_frozen_policy(acme, alice):
    analyst = get_user_model().objects.create_user("sim-ana")
    Membership.objects.create(user=analyst, organization=acme, role="analyst")
    world = simulation.build_world(alice, acme, "learning", topics=4, notes_per_topic=20, seed=2)
    frozen = simulation.build_world(alice, acme, "frozen", topics=4, notes_per_topic=20, seed=2)
    cfg = simulation.Config(sessions=120, shift_at=None, block=40, useful_per_topic=4, budget=5, seed=4)
    report = simulation.simulate(analyst, world, frozen, cfg)

    assert [(b.start, b.end) for b in report.blocks] == [(0, 40), (40, 80), (80, 120)]
    last = report.blocks[-1]
    # Loose: the last block of the learning graph beats the frozen twin on the same questions.
    assert last.hit5 >= last.frozen_hit5 and last.mrr > last.frozen_mrr + 0.1
    assert sum(b.mrr for b in report.blocks[1:]) > sum(b.frozen_mrr for b in report.blocks[1:]) + 0.2
    # Every report went through the API and its task: reinforce and outcome batches on the learning graph only.
    learning, frozen_graph = world[0], frozen[0]
    assert UpdateBatch.objects.filter(graph=learning, kind="outcome").count() == 120
    assert UpdateBatch.objects.filter(graph=learning, kind="reinforce").exists()
    assert not UpdateBatch.objects.filter(graph=frozen_graph).exists()
    assert AgentSession.objects.filter(graph=frozen_graph).count() == 120
    assert AuditEvent.objects.filter(action="graph.feedback", actor="user:sim-ana").count() >= 120


@pytest.mark.django_db(transaction=True)
def test_demo_history_is_filled_once():
    graph, _ = ensure_demo()
    first = fill_demo_history(sessions=30)
    assert first["status"] == "filled" and first["topics"] >= 3
    assert AgentSession.objects.filter(graph=graph).count() == 30
    assert UpdateBatch.objects.filter(graph=graph, kind="outcome").count() == 30
    assert DailyMetric.objects.filter(graph=graph).exists()
    again = fill_demo_history(sessions=30)
    assert again["status"] == "skipped"
    assert AgentSession.objects.filter(graph=graph).count() == 30
