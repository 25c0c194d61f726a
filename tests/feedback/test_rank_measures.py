"""Issue 39 item 4: the analyst's answer. Where the first used item ranked, per session (SESSION_RANKS); MRR and the
share of sessions whose top item was used, with 95% intervals and n, per week or over 7 rolling days; before and
after a revision over 7, 14 or 30 days with the difference's interval; the per-session CSV (analysts only)."""

from __future__ import annotations

import csv
import io
import math
from datetime import UTC, datetime, timedelta

import pytest

from feedback import analysis
from feedback.analysis import SessionRank
from feedback.models import AgentSession
from tests.conftest import HASHING
from tests.system.test_dashboard_roles_e2e import W0, _session, build

# --------------------------------------------------------------------------------------------------
# The statistics (no database)


def _s(day: int, rank: int | None, score: float | None = None, n: int = 0) -> SessionRank:
    return SessionRank(n, f"s{n}", None, W0 + timedelta(days=day), None, score, 1, rank)


def test_reciprocal_rank_and_top_item():
    assert [_s(0, r).reciprocal_rank for r in (1, 2, 4, None)] == [1.0, 0.5, 0.25, 0.0]
    assert [_s(0, r).top_used for r in (1, 2, None)] == [True, False, False]


def test_mean_and_share_intervals():
    e = analysis.mean_estimate([1.0, 0.5, 0.0, 1.0])
    assert e.n == 4 and e.value == pytest.approx(0.625)
    sd = math.sqrt(sum((v - 0.625) ** 2 for v in [1.0, 0.5, 0.0, 1.0]) / 3)
    assert e.low == pytest.approx(max(0, 0.625 - 1.959964 * sd / 2)) and e.high == 1.0  # clipped to [0, 1]
    assert analysis.mean_estimate([]) == analysis.Estimate(0, None, None, None)
    share = analysis.share_estimate([True, False])
    assert share.n == 2 and share.value == 0.5 and 0 < share.low < 0.5 < share.high < 1
    # 0 of 2 is not a crash to 0: the interval says how little two sessions tell.
    none = analysis.share_estimate([False, False])
    assert none.value == 0 and none.high > 0.6


def test_differences_and_their_intervals():
    d = analysis.mean_difference([0.0, 0.5, 0.25], [1.0, 1.0, 0.5])
    assert d.value == pytest.approx(0.5833, abs=1e-4) and d.low < d.value < d.high and not d.holds_zero
    same = analysis.share_difference([True, False], [False, True])
    assert same.value == 0 and same.holds_zero
    assert analysis.mean_difference([], [1.0]).value is None and analysis.mean_difference([], [1.0]).holds_zero


def test_weekly_and_rolling_periods():
    sessions = [_s(0, 1, n=1), _s(1, None, n=2), _s(9, 2, n=3)]
    first, last = (W0 + timedelta(days=0)).date(), (W0 + timedelta(days=13)).date()
    weeks = analysis.weekly(sessions, first, last)
    assert [w.mrr.n for w in weeks] == [2, 1]
    assert weeks[0].mrr.value == 0.5 and weeks[1].mrr.value == 0.5 and weeks[1].top.value == 0
    days = analysis.rolling(sessions, first, last)
    assert len(days) == 14 and days[0].mrr.n == 1 and days[1].mrr.n == 2 and days[8].mrr.n == 0
    assert days[9].mrr.n == 1  # the 7 days ending day 9 hold the third session only


def test_before_after_splits_at_the_revision():
    at = W0 + timedelta(days=8)
    sessions = [_s(0, 1, 1.0, 1), _s(2, None, 0.5, 2), _s(9, 1, 1.0, 3), _s(20, 1, 1.0, 4)]
    ba = analysis.before_after(sessions, 2, at, 7)
    assert [s.session_id for s in ba.sessions_before] == [2] and [s.session_id for s in ba.sessions_after] == [3]
    assert ba.before.mrr.value == 0 and ba.after.mrr.value == 1 and ba.mrr.value == 1
    wide = analysis.before_after(sessions, 2, at, 14)
    assert len(wide.sessions_before) == 2 and len(wide.sessions_after) == 2


# --------------------------------------------------------------------------------------------------
# From the ledgers, the impact page and the CSV


@pytest.fixture
def history(db, settings):
    settings.EMBEDDER = HASHING
    data = build()
    # A session that used its second item, after the policy change.
    _session(data["graph"], data["users"]["ana"], "s-second", W0 + timedelta(days=10), use_rank=2, budget=3)
    AgentSession.objects.filter(graph=data["graph"], owner__isnull=True).update(owner=data["users"]["ana"])
    return data


def test_session_ranks_from_the_ledgers(history):
    graph = history["graph"]
    rows = {r.external_id: r for r in analysis.load(graph, W0 - timedelta(days=1), W0 + timedelta(days=30))}
    assert {k: r.first_used_rank for k, r in rows.items()} == {
        "s-used": 1,
        "s-rework": None,
        "s-later": 1,
        "s-second": 2,
        "s-graph": None,
    }
    assert rows["s-used"].revision == 1 and rows["s-later"].revision == 2
    assert rows["s-used"].outcome_score == 1.0 and rows["s-rework"].outcome_score == 0.5
    assert rows["s-graph"].outcome_score is None
    # The window: only sessions whose first retrieval falls in it.
    assert {r.external_id for r in analysis.load(graph, W0 + timedelta(days=8), W0 + timedelta(days=12))} == {
        "s-later",
        "s-second",
    }


def test_sessions_csv_for_analysts_only(client, history):
    g = history["graph"].pk
    client.force_login(history["users"]["rita"])  # reviewer
    assert client.get(f"/g/{g}/sessions/?format=csv").status_code == 403
    client.force_login(history["users"]["ana"])
    response = client.get(f"/g/{g}/sessions/?format=csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == [
        "session",
        "agent",
        "started",
        "outcome",
        "policy_revision",
        "first_used_rank",
        "top_item_used",
    ]
    by_id = {r[0]: r for r in rows[1:]}
    assert by_id["s-used"][1:2] == ["ana"] and by_id["s-used"][3:] == ["accepted", "1", "1", "yes"]
    assert by_id["s-rework"][3:] == ["rework", "1", "none", "no"]
    assert by_id["s-second"][4:] == ["2", "2", "no"]
    # The list's filters apply.
    only = client.get(f"/g/{g}/sessions/?format=csv&outcome=rework").content.decode()
    assert [r[0] for r in csv.reader(io.StringIO(only))][1:] == ["s-rework"]


def test_impact_page_answers_with_intervals_n_and_a_before_after(client, history):
    g = history["graph"].pk
    client.force_login(history["users"]["ana"])
    since = (W0 - timedelta(days=7)).date().isoformat()
    until = (W0 + timedelta(days=20)).date().isoformat()
    page = client.get(f"/g/{g}/impact/?from={since}&to={until}&window=7").content.decode()
    assert 'id="impact-rank"' in page and 'id="rank-table"' in page and 'id="impact-before-after"' in page
    # r2 (the only change) is the default; 7 days either side: s-used and s-rework before, s-later and s-second after.
    assert 'value="2" selected' in page and 'value="7" selected' in page
    table = page[page.index('id="before-after-table"') :]
    assert "0.500 (2)" in table and "0.750 (2)" in table  # MRR before (1 + 0) / 2, after (1 + 1/2) / 2
    rolling = client.get(f"/g/{g}/impact/?from={since}&to={until}&every=rolling").content.decode()
    assert "7 days ending" in rolling
    bad = client.get(f"/g/{g}/impact/?window=9&revision=77").content.decode()
    assert "window: expected one of 7, 14, 30" in bad and "revision: no such revision" in bad


def test_every_time_chart_marks_the_policy_change(client, history):
    import json
    import re

    g = history["graph"].pk
    client.force_login(history["users"]["ana"])
    since = (W0 - timedelta(days=7)).date().isoformat()
    until = (W0 + timedelta(days=20)).date().isoformat()
    page = client.get(f"/g/{g}/impact/?from={since}&to={until}").content.decode()
    change_day = (W0 + timedelta(days=8)).date().isoformat()
    figures = dict(re.findall(r'<script id="([^"]+)" type="application/json">(.*?)</script>', page, re.S))
    time_charts = [k for k in figures if k != "impact-before-after"]
    assert len(time_charts) >= 5
    for key in time_charts:
        shapes = json.loads(figures[key])["layout"].get("shapes", [])
        assert any(str(s.get("x0", "")).startswith(change_day) for s in shapes), key
    assert datetime.now(UTC)  # the page rendered with today's range too
