"""Mean weight by edge type, day by day, is read back from the weight history (issue 25 item 4): days rolled
up after the fact show each day's weights, not today's (the flat line through three decay runs)."""

from datetime import UTC, datetime, time, timedelta

import pytest

from feedback import actions, metrics
from feedback.rules import ManualValue
from graphadmin import clock
from graphadmin.models import Edge, EdgeType, Node

pytestmark = pytest.mark.django_db

D0 = datetime.combine(datetime.now(UTC).date() - timedelta(days=30), time(9), tzinfo=UTC)


def _mean(row, edge_type="related", field="weight"):
    return next(w for w in row["weights"] if w["edge_type"] == edge_type)[field]["mean"]


def test_each_day_shows_the_weights_it_ended_with(acme_graph, oscar):
    related = EdgeType.objects.get(graph=acme_graph, name="related")
    with clock.using(clock.SimulatedClock(D0)):
        a, b, c = (Node.objects.create(graph=acme_graph, key=k, title=k, text=k) for k in "abc")
        ab = Edge.objects.create(graph=acme_graph, source=a, target=b, edge_type=related, weight=0.8)
        bc = Edge.objects.create(graph=acme_graph, source=b, target=c, edge_type=related, weight=0.4)
    with clock.using(clock.SimulatedClock(D0 + timedelta(days=2))):
        actions.do_set_weights(acme_graph, [ManualValue("edge", ab.pk, "weight", 1.0)], actor=oscar)
    decay_at = D0 + timedelta(days=20)  # the edges are older than the decay period
    with clock.using(clock.SimulatedClock(decay_at)):
        assert actions.do_decay(acme_graph, actor="task:test", now=decay_at).edge_updates == 2  # a block of history
    with clock.using(clock.SimulatedClock(D0 + timedelta(days=22))):
        actions.do_set_weights(acme_graph, [ManualValue("edge", bc.pk, "feedback_weight", 0.9)], actor=oscar)
    ab.refresh_from_db()
    bc.refresh_from_db()
    rate = acme_graph.current_policy().decay_rate

    # Every day rolled up now, after all of it happened.
    days = {n: metrics.rollup(acme_graph, (D0 + timedelta(days=n)).date()).data for n in (-1, 0, 2, 19, 20, 22, 23)}
    assert days[-1]["weights"] == [] and days[-1]["totals"]["edges"] == 0  # before the edges existed
    assert _mean(days[0]) == pytest.approx((0.8 + 0.4) / 2)
    assert _mean(days[2]) == _mean(days[19]) == pytest.approx((1.0 + 0.4) / 2)
    assert _mean(days[20]) == pytest.approx((1.0 + 0.4) * rate / 2)
    assert _mean(days[22]) == _mean(days[23]) == pytest.approx((ab.weight + bc.weight) / 2)
    assert _mean(days[20], field="feedback_weight") == pytest.approx(0.5)
    assert _mean(days[22], field="feedback_weight") == pytest.approx((0.5 + 0.9) / 2)
    histogram = next(w for w in days[0]["weights"] if w["edge_type"] == "related")["weight"]["histogram"]
    assert histogram[8] == 1 and histogram[4] == 1  # 0.8 and 0.4, not today's values
