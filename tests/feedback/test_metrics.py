"""The daily metrics rollup (hand-computed figures) and the endpoint that serves it."""

from datetime import UTC, datetime, timedelta

import pytest

from feedback import actions, metrics
from feedback.actions import UseItem
from feedback.models import DailyMetric

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def day_of_feedback(oscar, acme_graph, surfaced, small_graph, edges):
    """Today: s1 (totals 0.9, 0.8, 0.7) used its top candidate's edge and was accepted; s2 (same totals) used
    nothing."""
    n = small_graph
    make_session(acme_graph, "s2", [(n["c"], edges["bc"], True), (n["b"], edges["ab"], True), (n["a"], None, False)])
    actions.do_record_uses(surfaced, [UseItem("edge", edges["ab"].pk, "explicit")], actor=oscar)
    actions.do_apply_outcome(acme_graph, "s1", "accepted", actor=oscar)
    return datetime.now(UTC).date()


def test_rollup_figures(acme_graph, day_of_feedback):
    data = metrics.rollup(acme_graph, day_of_feedback).data
    scores = data["scores"]
    assert (scores["count"], scores["selected"]) == (6, 4)
    assert (
        scores["min"] == pytest.approx(0.7)
        and scores["max"] == pytest.approx(0.9)
        and scores["mean"] == pytest.approx(0.8)
    )
    assert scores["stddev"] == pytest.approx((0.04 / 6) ** 0.5)
    assert sum(b["count"] for b in scores["histogram"]) == 6
    assert scores["histogram"][0]["count"] == 2 and scores["histogram"][-1]["count"] == 2
    assert {(u["kind"], u["edge_type"], u["field"]): u["count"] for u in data["updates"]} == {
        ("reinforce", "related", "weight"): 1,
        ("outcome", "related", "feedback_weight"): 1,
        ("outcome", "depends_on", "feedback_weight"): 1,
        ("outcome", "(node)", "feedback_weight"): 2,
    }
    related = next(w for w in data["weights"] if w["edge_type"] == "related")
    assert (
        related["count"] == 1
        and related["weight"]["mean"] == pytest.approx(0.55)
        and related["feedback_weight"]["mean"] == pytest.approx(0.55)
    )
    assert related["weight"]["histogram"][5] == 1  # 0.55 falls in [0.5, 0.6)
    assert data["top_used"] == {"top_k": 3, "sessions": 2, "used": 1, "fraction": 0.5}
    assert data["outcomes"] == {"accepted": 1}


def test_rollup_is_an_upsert_and_other_days_are_empty(acme_graph, day_of_feedback):
    metrics.rollup(acme_graph, day_of_feedback)
    metrics.rollup(acme_graph, day_of_feedback)
    assert DailyMetric.objects.count() == 1
    empty = metrics.rollup(acme_graph, day_of_feedback - timedelta(days=3)).data
    assert empty["scores"]["count"] == 0 and empty["updates"] == [] and empty["top_used"]["fraction"] is None


def test_endpoint_serves_the_date_range(api, rita, acme_graph, day_of_feedback):
    for offset in (0, 1, 5):
        metrics.rollup(acme_graph, day_of_feedback - timedelta(days=offset))
    start = (day_of_feedback - timedelta(days=2)).isoformat()
    rows = api(rita).get(f"/api/graphs/{acme_graph.pk}/metrics/?from={start}&to={day_of_feedback.isoformat()}").data
    assert [r["day"] for r in rows] == [(day_of_feedback - timedelta(days=1)).isoformat(), day_of_feedback.isoformat()]
    assert rows[-1]["data"]["top_used"]["fraction"] == 0.5
