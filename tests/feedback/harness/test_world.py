"""Does the graph learn? The simulator at a small scale: learning beats the frozen policy on the same questions.

Transactional: the reports are enqueued on commit and run eagerly (feedback.harness.inprocess.eager_tasks).
"""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth import get_user_model

from feedback import charts, learning
from feedback.harness.config import WorldConfig
from feedback.harness.demo import ensure_demo, fill_demo_history
from feedback.harness.world import build_world, simulate
from feedback.models import AgentSession, ContextInjection, DailyMetric, UpdateBatch, WeightChange
from graphadmin import audit
from graphadmin.models import AuditEvent, Membership, PolicyRevision


@pytest.mark.django_db(transaction=True)
def test_learning_beats_the_frozen_policy(acme, alice):
    agent = get_user_model().objects.create_user("sim-ana")
    Membership.objects.create(user=agent, organization=acme, role="agent")
    world = build_world(alice, acme, "learning", topics=4, notes_per_topic=20, seed=2)
    frozen = build_world(alice, acme, "frozen", topics=4, notes_per_topic=20, seed=2)
    # The bulk-built records are audited, one event per world.
    built = AuditEvent.objects.filter(action="graph.simulation.build").order_by("seq")
    assert [e.payload["nodes"] for e in built] == [84, 84] and built[0].scope["graph"] == world[0].pk
    cfg = WorldConfig(sessions=120, shift_at=None, block=40, useful_per_topic=4, budget=5, seed=4)
    report = simulate(agent, world, frozen, cfg)

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
def test_demo_history_is_filled_once_over_weeks(client):
    graph, _ = ensure_demo()
    # The graph was imported at the start of its simulated history, nine weeks back.
    assert graph.created_at.date() <= (datetime.now(UTC) - timedelta(weeks=9)).date()
    first = fill_demo_history(sessions=40)
    assert first["status"] == "filled" and first["sessions"] == 40 and first["weeks"] == 9
    assert AgentSession.objects.filter(graph=graph).count() == 40
    assert UpdateBatch.objects.filter(graph=graph, kind="outcome").count() == 40
    assert first["decay_runs"] >= 7 and UpdateBatch.objects.filter(graph=graph, kind="decay").exists()
    # The question-only path: every injection has the question's text and no start node.
    injections = ContextInjection.objects.filter(graph=graph)
    assert injections.count() == 40 and not injections.filter(query="").exists()
    assert not [i.params for i in injections if i.params.get("start_nodes")]
    # The rows carry the simulated clock: sessions, injections, batches and weight history over 8+ weeks.
    weeks = {d.isocalendar()[:2] for d in AgentSession.objects.filter(graph=graph).values_list("started_at", flat=True)}
    assert len(weeks) >= 8
    changes = WeightChange.objects.filter(graph=graph).values_list("created_at", flat=True)
    assert len({d.isocalendar()[:2] for d in changes}) >= 8
    batch_weeks = UpdateBatch.objects.filter(graph=graph, kind="reinforce").values_list("started_at", flat=True)
    assert len({d.isocalendar()[:2] for d in batch_weeks}) >= 6
    # The charts: the overview and impact data have points on at least 8 distinct weeks.
    rows = DailyMetric.objects.filter(graph=graph)
    since, until = rows.earliest("day").day, rows.latest("day").day
    assert (until - since).days >= 8 * 7 - 1
    plotted = charts.rollup_rows(graph, since, until)
    for chart in (charts.top_used_fraction(plotted), charts.outcomes_per_day(plotted)):
        xs = {x for series in chart["data"] for x, y in zip(series["x"], series["y"], strict=True) if y}
        assert len({date.fromisoformat(str(x)[:10]).isocalendar()[:2] for x in xs}) >= 8, chart["layout"]
    # The demo operator changed the policy halfway, on the simulated clock.
    r2 = PolicyRevision.objects.get(graph=graph, revision=2)
    assert first["policy_revisions"] == 2 and r2.created_by.username == "operator"
    assert since < r2.created_at.date() < until and r2.learning_rate == 0.2
    # Learning at a glance has its weeks and its marks: the policy change and the decay runs.
    glance = learning.weekly(graph)
    assert len([w for w in glance.weeks if w.sessions]) >= 8
    assert sum(w.sessions for w in glance.weeks) == 40
    kinds = [m["kind"] for m in glance.marks]
    periods = set(UpdateBatch.objects.filter(graph=graph, kind="decay").values_list("details__period", flat=True))
    assert kinds.count("policy") == 1 and kinds.count("decay") == len(periods) >= 7
    # The audit chain stays valid with simulated times (seq order holds).
    assert audit.verify(graph.organization).ok
    again = fill_demo_history(sessions=40)
    assert again["status"] == "skipped"
    assert AgentSession.objects.filter(graph=graph).count() == 40
