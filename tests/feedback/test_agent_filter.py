"""The analyst's agent filter (issue 25 item 4): load-test sessions can be left out of every session figure of
the analytics pages and of the CSV (daily rollups split by agent, weekly learning, revision effects), and a
before/after carries its n and 95% interval."""

import csv
import io
from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from feedback import actions, metrics, revisions
from feedback.actions import UseItem
from graphadmin.models import Membership

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def traffic(acme, acme_graph, small_graph, edges, ada, oscar):
    """Today: ada's two sessions (both used their top candidate, accepted) and three load-test sessions
    of ``loadtest-agent`` (nothing used, rejected)."""
    load = get_user_model().objects.create_user(username="loadtest-agent")
    Membership.objects.create(user=load, organization=acme, role="agent")
    n = small_graph
    for name, owner in [("a1", ada), ("a2", ada), ("l1", load), ("l2", load), ("l3", load)]:
        session = make_session(acme_graph, name, [(n["b"], edges["ab"], True), (n["c"], edges["bc"], True)], owner)
        if owner == ada:
            actions.do_record_uses(session, [UseItem("node", n["b"].pk, "explicit")], actor=oscar)
        actions.do_apply_outcome(acme_graph, name, "accepted" if owner == ada else "rejected", actor=oscar)
    metrics.rollup(acme_graph, datetime.now(UTC).date())
    return load


def test_the_rollup_splits_session_figures_by_agent(acme_graph, traffic, ada):
    row = metrics.rollup(acme_graph, datetime.now(UTC).date())
    assert row.data["top_used"]["sessions"] == 5 and row.data["top_used"]["used"] == 2
    split = row.data["agents"]
    assert split[str(ada.pk)]["top_used"] == {"sessions": 2, "used": 2}
    assert split[str(traffic.pk)]["top_used"] == {"sessions": 3, "used": 0}
    assert split[str(traffic.pk)]["outcomes"] == {"rejected": 3}
    assert split[str(ada.pk)]["scores"]["count"] == 4


def test_the_filter_leaves_the_load_test_out_of_pages_and_csv(client, acme_graph, traffic, ana):
    client.force_login(ana)
    g = acme_graph.pk
    everyone = client.get(f"/g/{g}/impact/", {"format": "csv"}).content.decode()
    only_ada = client.get(f"/g/{g}/impact/", {"format": "csv", "agent": ["ada", "-"]}).content.decode()

    def cells(text, section, measure, key=""):
        return [r[4] for r in csv.reader(io.StringIO(text)) if r[1] == section and r[3] == measure and r[2] == key]

    assert cells(everyone, "top_used", "fraction") == ["0.4"]
    assert cells(only_ada, "top_used", "fraction") == ["1.0"]
    assert cells(only_ada, "outcomes", "sessions", "rejected") == []
    assert cells(everyone, "outcomes", "sessions", "rejected") == ["3"]
    assert cells(only_ada, "weekly_learning", "sessions")[-1] == "2"
    assert cells(everyone, "weekly_learning", "sessions")[-1] == "5"
    assert cells(only_ada, "about", "filter", "agents") == ["ada"]
    assert "daily: sessions with an injection that day" in only_ada and "weekly: sessions whose first" in only_ada
    # The pages: the filter's form, its note, and the CSV link that keeps it.
    page = client.get(f"/g/{g}/impact/", {"agent": ["ada", "-"]}).content.decode()
    assert 'id="agent-filter"' in page and "count the sessions of ada only" in page
    assert "agent=ada" in page.split('id="csv-link"')[0].rsplit("<a", 1)[1]
    assert "count the sessions of ada only" in client.get(f"/g/{g}/", {"agent": ["ada", "-"]}).content.decode()
    # A name that owns no session: every session is shown, and the page says why.
    assert "No session in these days belongs to" in client.get(f"/g/{g}/impact/", {"agent": "nobody"}).content.decode()


def test_the_filter_sums_the_selected_agents(acme_graph, traffic, ada):
    rows = list(acme_graph.daily_metrics.all())
    everyone = metrics.agent_filter([], rows)
    only_ada = metrics.agent_filter(["ada"], rows)
    assert not everyone.active and only_ada.active and only_ada.names == ["ada"]
    assert revisions.revision_effects(acme_graph, everyone)[0]["after"]["sessions"] == 0  # today is r1's change day
    rows = metrics.for_agents(rows, only_ada)
    assert rows[0].data["top_used"] == {"top_k": 3, "sessions": 2, "used": 2, "fraction": 1.0}
    assert rows[0].data["outcomes"] == {"accepted": 2}


@pytest.mark.parametrize(
    "used_a, n_a, used_b, n_b, low, high",
    [
        # Newcombe (1998), Statistics in Medicine 17:873-890, table II, method 10.
        (56, 70, 48, 80, 0.0524, 0.3339),
        (9, 10, 3, 10, 0.1705, 0.8090),
        (6, 7, 2, 7, 0.0582, 0.8062),
        (5, 56, 0, 29, -0.0381, 0.1926),
        (10, 10, 0, 20, 0.6791, 1.0),
    ],
)
def test_difference_interval_matches_newcombes_table(used_a, n_a, used_b, n_b, low, high):
    lo, hi = revisions.difference_interval(used_a, n_a, used_b, n_b)
    assert (lo, hi) == (pytest.approx(low, abs=6e-4), pytest.approx(high, abs=6e-4))


def test_no_interval_without_sessions_on_both_sides():
    assert revisions.difference_interval(1, 2, 0, 0) is None
