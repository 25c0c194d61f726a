"""Learning at a glance (the overview): weekly figures from the ledgers on a small history built on a
simulated clock, exact; its marks (policy changes, decay runs); the chart and table on the page.

The history, on ``rg`` (tests/conftest.py), in the weeks W0..W3 (W0 the Monday five weeks before this one):

    before W0  s0: used its #1, accepted                              (outside the window)
    W0         s1: used its #1, accepted (1.0)   s2: used only its #4, rework (0.5)   s3: nothing, no outcome
    W1 Wed     policy r2: outcome_rework 0.5 -> 0.4
    W1 Thu     s4: used its #2, rework (0.4 under r2)   s5: used its #1, rejected (0.0)
    W2 Tue     a decay run
    W3         s6: used its #3, accepted; and a second injection of s1 (counted in W0, its first)
"""

from datetime import UTC, datetime, time, timedelta

import pytest

from feedback import actions, charts, learning
from graphadmin import actions as core_actions
from graphadmin import clock
from graphadmin.models import Edge, Node
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare

TODAY = datetime.now(UTC).date()
W0 = datetime.combine(learning.week_start(TODAY) - timedelta(weeks=5), time(9), tzinfo=UTC)
NOW = W0 + timedelta(days=23, hours=3)  # Wednesday of W3
WEEKS = [(W0 + timedelta(weeks=n)).date() for n in range(4)]


def _session(graph, actor, name, at, use_rank=None, outcome=None, budget=5):
    with clock.using(clock.SimulatedClock(at)):
        ctx = assemble_context(
            prepare(graph, RetrievalRequest(session=name, query="vector search in postgres", budget=budget))
        )
        ranked = {c.rank: c for c in ctx.injection.candidates.all() if c.selected}
        if use_rank is not None:
            assert use_rank in ranked, (name, sorted(ranked))
            node = ranked[use_rank].node_id
            actions.do_record_uses(ctx.injection.session, [actions.UseItem("node", node, "explicit")], actor=actor)
        if outcome:
            actions.do_apply_outcome(graph, name, outcome, actor=actor)
    return ctx


@pytest.fixture
def history(rg, ana, oscar):
    g = rg["graph"]
    # An edge no retrieval reaches (its ends have no embedding and no other edge), so decay has one to decay.
    with clock.using(clock.SimulatedClock(W0 - timedelta(weeks=2))):
        far = [Node.objects.create(graph=g, key=f"far-{n}", title=f"Far {n}", text="unreached") for n in (1, 2)]
        Edge.objects.create(graph=g, source=far[0], target=far[1], edge_type=rg["types"]["related"], weight=0.8)
    _session(g, ana, "s0", W0 - timedelta(days=3), use_rank=1, outcome="accepted")
    _session(g, ana, "s1", W0 + timedelta(hours=1), use_rank=1, outcome="accepted")
    _session(g, ana, "s2", W0 + timedelta(days=1), use_rank=4, outcome="rework")
    _session(g, ana, "s3", W0 + timedelta(days=2))
    with clock.using(clock.SimulatedClock(W0 + timedelta(days=9))):
        core_actions.do_set_policy(g, {"outcome_rework": 0.4}, actor=oscar, note="rework counts less")
    _session(g, ana, "s4", W0 + timedelta(days=10), use_rank=2, outcome="rework")
    _session(g, ana, "s5", W0 + timedelta(days=10, hours=2), use_rank=1, outcome="rejected")
    decay_at = W0 + timedelta(days=15)
    with clock.using(clock.SimulatedClock(decay_at)):
        decay = actions.do_decay(g, actor="task:test", now=decay_at)
    assert decay.edge_updates > 0
    _session(g, ana, "s6", W0 + timedelta(days=21), use_rank=3, outcome="accepted")
    _session(g, ana, "s1", W0 + timedelta(days=22))  # s1 again: still W0's session
    return {"graph": g, "decay_at": decay_at, "decay": decay}


def _figures(week):
    return (week.start, week.sessions, week.used, week.outcomes, week.mean_score)


def test_weekly_figures_are_exact(history, django_assert_max_num_queries):
    with django_assert_max_num_queries(2):
        glance = learning.weekly(history["graph"], now=NOW, weeks=4)
    assert [_figures(w) for w in glance.weeks] == [
        (WEEKS[0], 3, 1, 2, pytest.approx(0.75)),
        (WEEKS[1], 2, 2, 2, pytest.approx(0.2)),
        (WEEKS[2], 0, 0, 0, None),
        (WEEKS[3], 1, 1, 1, pytest.approx(1.0)),
    ]
    assert [w.share for w in glance.weeks] == [pytest.approx(1 / 3), 1.0, None, 1.0]


def test_marks_are_the_policy_change_and_the_decay_run(history):
    glance = learning.weekly(history["graph"], now=NOW, weeks=4)
    assert [(m["kind"], m["label"]) for m in glance.marks] == [("policy", "policy r2"), ("decay", "decay")]
    policy, decay = glance.marks
    assert policy["at"] == W0 + timedelta(days=9, microseconds=policy["at"].microsecond)
    assert policy["text"] == "policy r2 (rework counts less)"
    assert decay["at"] - history["decay_at"] < timedelta(seconds=1)
    run = history["decay"]
    assert decay["text"] == f"decay, period {run.details['period']}: {run.edge_updates} edge(s)"
    # Each mark sits in its week; the others have none.
    assert [[m["kind"] for m in w.marks] for w in glance.weeks] == [[], ["policy"], ["decay"], []]


def test_the_figure_draws_both_lines_and_one_line_per_mark(history):
    fig = charts.learning_at_a_glance(learning.weekly(history["graph"], now=NOW, weeks=4))
    share, score = fig["data"]
    assert share["x"] == [w.isoformat() for w in WEEKS]
    assert share["y"] == [pytest.approx(1 / 3), 1.0, None, 1.0]
    assert score["y"] == [pytest.approx(0.75), pytest.approx(0.2), None, pytest.approx(1.0)]
    shapes = fig["layout"]["shapes"]
    assert [(s["line"]["dash"], s["x0"][:10]) for s in shapes] == [
        ("solid", (W0 + timedelta(days=9)).date().isoformat()),
        ("dot", (W0 + timedelta(days=15)).date().isoformat()),
    ]
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["policy r2", "decay"]


def test_another_graph_and_the_window_edges_do_not_count(history, globex_graph, mallory):
    _session(globex_graph, mallory, "other", W0 + timedelta(hours=2), outcome="accepted")
    glance = learning.weekly(history["graph"], now=NOW, weeks=4)
    assert glance.weeks[0].sessions == 3  # s0 (before the window) and globex's session are not in it
    # A window of one week holds W3 only: s1's later injection does not make it a W3 session.
    only = learning.weekly(history["graph"], now=NOW, weeks=1)
    assert [_figures(w) for w in only.weeks] == [(WEEKS[3], 1, 1, 1, pytest.approx(1.0))]
    assert only.marks == []


def test_the_overview_shows_chart_and_table(client, history, rita):
    client.force_login(rita)
    page = client.get(f"/g/{history['graph'].pk}/").content.decode()
    assert 'id="learning-glance"' in page and 'id="fig-learning"' in page
    assert "Learning per week (the chart's figures)" in page


def test_leading_weeks_without_sessions_or_marks_are_left_out(history):
    glance = learning.weekly(history["graph"], now=NOW, weeks=8)
    # s0's week (the one before W0) is the first with a session: the three before it are left out.
    assert [(w.start, w.sessions) for w in glance.weeks[:2]] == [(WEEKS[0] - timedelta(weeks=1), 1), (WEEKS[0], 3)]
    assert len(glance.weeks) == 5 and glance.window == 8


def test_no_sessions_says_so(client, acme_graph, rita):
    client.force_login(rita)
    page = client.get(f"/g/{acme_graph.pk}/").content.decode()
    assert "No sessions in the last 12 weeks yet" in page and 'id="fig-learning"' not in page
