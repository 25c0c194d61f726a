"""Issue 25 in headless Chromium, as each role: the path of #1 readable on the injection page, the pairwise
explanation first and in plain words, the organization admin administering through the admin and the Members
page, the analyst's agent filter (load-test sessions out of every chart and the CSV), a 403 that names the
role, and no page wider than a 390 px screen.

The rows are those of tests/system/test_dashboard_roles_e2e.py (``build``: acme's cast on the ranked graph
with three weeks of sessions, a policy change and a decay run), plus the load test's traffic: sessions of the
service account ``loadtest-agent`` that used nothing and were rejected. ``alice`` (admin) is staff with no
Django model permission, as ``ensure_demo`` makes the demo's admin.
"""

from __future__ import annotations

import csv
import io
import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from feedback import actions, metrics
from feedback.models import AgentSession, UpdateBatch
from graphadmin.models import Membership
from ranking.subgraph import injection_subgraph
from tests.conftest import HASHING
from tests.system.site import module_site
from tests.system.test_dashboard_roles_e2e import USERS, W0, _session, build

pytestmark = pytest.mark.browser

LOAD_SESSIONS = 6


def build_with_load() -> dict:
    data = build()
    graph = data["graph"]
    alice = data["users"]["alice"]
    alice.is_staff = True
    alice.save()
    load = get_user_model().objects.create_user(username="loadtest-agent", password="pw-loadtest-agent")
    Membership.objects.create(user=load, organization=graph.organization, role="agent")
    # build()'s sessions are ana's (an agent's sessions have their caller as owner).
    AgentSession.objects.filter(graph=graph, owner__isnull=True).update(owner=data["users"]["ana"])
    for n in range(LOAD_SESSIONS):
        _session(graph, load, f"load-{n}", W0 + timedelta(days=16, minutes=n), outcome="rejected", budget=3, owner=load)
    for n in range(17):
        metrics.rollup(graph, (W0 + timedelta(days=n)).date())
    data["load"] = load
    # A manual batch for the admin to roll back.
    edge = data["edges"]["a>b"]
    result = actions.do_set_weights(graph, [actions.ManualValue("edge", edge.pk, "weight", 0.2)], actor=alice)
    data["batch"] = UpdateBatch.objects.get(pk=result.batch_id)
    return data


_live_server_helper, site, browser = module_site(build_with_load, EMBEDDER=HASHING)


# --------------------------------------------------------------------------------------------------
# Item 1: the path of #1 on the injection page


@pytest.mark.parametrize("username", list(USERS))
def test_the_path_of_rank_1_is_on_screen_left_to_right_with_readable_labels(site, as_user, username):
    g, injection = site.data["graph"].pk, site.data["injection"]
    data = injection_subgraph(injection)
    first = next(p for p in data["paths"] if p["rank"] == 1)
    edges = {e["id"]: e for e in data["edges"]}
    ends = [edges[e]["source"] for e in first["edges"][:1]] + [edges[e]["target"] for e in first["edges"]]
    on_path = [f"n{n}" for n in ends] or [f"n{first['node']}"]
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/injections/{injection.pk}/")
    page.wait_for_selector("#injection-graph[data-state=ready]", timeout=15000)
    canvas = page.locator("#injection-graph .graph-canvas").bounding_box()
    shown = page.evaluate(
        """(ids) => { const cy = document.getElementById('injection-graph').graph;
            return { zoom: cy.zoom(), nodes: ids.map(id => { const n = cy.getElementById(id);
              return { id, x: n.renderedPosition().x, y: n.renderedPosition().y, visible: n.visible(),
                       label: n.data('label') }; }) }; }""",
        on_path,
    )
    assert shown["zoom"] >= 0.9  # 11 px labels drawn at 10 px or more
    for node in shown["nodes"]:
        assert node["visible"] and 0 <= node["x"] <= canvas["width"] and 0 <= node["y"] <= canvas["height"], node
    # Left to right: each step of the path one column further right.
    xs = [n["x"] for n in shown["nodes"]]
    assert xs == sorted(xs) and (len(xs) < 2 or xs[-1] > xs[0])
    assert shown["nodes"][-1]["label"].startswith("#1 ")
    # The controls: fit, zoom, the cut candidates behind a toggle, the compared pair.
    controls = page.locator("#injection-graph .graph-controls")
    for name in ("Zoom in", "Zoom out", "Fit", "Show #i and #j"):
        assert controls.get_by_role("button", name=name).count() == 1
    toggle = controls.locator(".graph-toggle-cut")
    if toggle.count():
        hidden = page.evaluate("() => document.getElementById('injection-graph').graph.nodes('.hidden-cut').length")
        assert hidden > 0
        toggle.click()
        assert toggle.get_attribute("aria-pressed") == "true"
        assert page.evaluate("() => document.getElementById('injection-graph').graph.nodes('.hidden-cut').length") == 0
    controls.get_by_role("button", name="Show #i and #j").click()
    assert "Showing #1 and #2" in page.locator("#injection-graph .graph-status").inner_text()


# --------------------------------------------------------------------------------------------------
# Item 2: why #1 beat #2, first and in plain words


@pytest.mark.parametrize("username", list(USERS))
def test_the_explanation_comes_first_and_names_both_notes(site, as_user, username):
    g, injection = site.data["graph"].pk, site.data["injection"]
    titles = {c.rank: c.node.title for c in injection.candidates.select_related("node").filter(rank__in=(1, 2))}
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/injections/{injection.pk}/")
    summary = page.locator("#comparison .why-summary").inner_text()
    assert f"“{titles[1]}” (#1)" in summary and f"“{titles[2]}” (#2)" in summary
    assert "ranks above" in summary or "score the same" in summary
    assert "vector (" not in summary  # components in words, not code names
    # Before the chart and the graph on the page, and within a few Tab stops.
    order = page.evaluate(
        """() => { const c = document.getElementById('comparison'), g = document.getElementById('injection-graph');
            return c.compareDocumentPosition(g) & Node.DOCUMENT_POSITION_FOLLOWING; }"""
    )
    assert order
    page.locator("body").focus()
    stops = 0
    while page.evaluate("() => document.activeElement.id") != "cmp-i":
        page.keyboard.press("Tab")
        stops += 1
        assert stops < 25, "the comparison form is not within 25 Tab stops"


# --------------------------------------------------------------------------------------------------
# Item 3: the organization admin administers


def test_the_admin_opens_the_batch_list_and_rolls_back(site, as_user):
    g, batch = site.data["graph"].pk, site.data["batch"]
    page = as_user("alice")
    page.goto(f"{site.url}/g/{g}/")
    page.get_by_role("link", name="Admin", exact=True).click()
    page.wait_for_url(f"{site.url}/admin/", wait_until="domcontentloaded")
    assert "permission to view or edit anything" not in page.content()
    page.get_by_role("link", name="Update batches", exact=True).click()
    page.locator(f"input[name=_selected_action][value='{batch.pk}']").check()
    page.locator("select[name=action]").select_option("rollback_batches")
    page.locator("button[name=index]").first.click()  # the action bar's "Go"
    assert f"Batch #{batch.pk} rolled back by batch #" in page.locator("ul.messagelist").inner_text()
    assert UpdateBatch.objects.filter(rollback_of=batch).exists()
    # The Members page: her organization's members and roles.
    page.goto(f"{site.url}/g/{g}/")
    page.get_by_role("link", name="Members").click()
    table = page.locator("#members").inner_text()
    assert all(name in table for name in USERS) and "mallory" not in table


@pytest.mark.parametrize("username", ["oscar", "ana", "rita"])
def test_other_roles_see_no_members_link_and_get_a_403_that_names_their_role(site, as_user, username):
    g = site.data["graph"].pk
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/")
    assert page.get_by_role("link", name="Members").count() == 0
    response = page.goto(f"{site.url}/g/{g}/members/")
    assert response.status == 403
    reason = page.locator(".error-reason").inner_text()
    assert f"Your role in this organization, {USERS[username]}, may not do this (needs admin)." in reason
    assert page.get_by_role("link", name="Back to your graphs").count() == 1


def test_a_reviewer_is_refused_the_impact_page_with_the_role_named(site, as_user):
    page = as_user("rita")
    assert page.goto(f"{site.url}/g/{site.data['graph'].pk}/impact/").status == 403
    assert "reviewer, may not do this (needs analyst)" in page.locator(".error-reason").inner_text()


# --------------------------------------------------------------------------------------------------
# Item 4: the analyst leaves the load test out of every chart and the CSV


def _figure(page, figure_id):
    return json.loads(page.locator(f"script#{figure_id}").text_content())


def test_the_analysts_filter_removes_the_load_sessions_everywhere(site, as_user):
    g = site.data["graph"].pk
    day = (W0 + timedelta(days=16)).date()
    page = as_user("ana")
    page.goto(f"{site.url}/g/{g}/impact/?from={day - timedelta(days=20)}&to={day}")
    outcomes_all = _figure(page, "impact-outcomes")
    rejected_all = next(s for s in outcomes_all["data"] if s["name"] == "rejected")
    assert sum(rejected_all["y"]) == LOAD_SESSIONS
    page.locator("#agent-filter").get_by_label("loadtest-agent").uncheck()
    page.locator("#agent-filter").get_by_role("button", name="Apply").click()
    page.wait_for_selector(".filter-note")
    assert "count the sessions of ana only" in page.locator(".filter-note").inner_text()
    rejected = next(s for s in _figure(page, "impact-outcomes")["data"] if s["name"] == "rejected")
    assert sum(rejected["y"]) == 0
    assert _figure(page, "impact-top-used")["data"][0]["y"]  # drawn from ana's sessions
    # The CSV the page links to keeps the filter.
    href = page.locator("#csv-link").get_attribute("href")
    assert "agent=ana" in href
    text = page.evaluate("async (u) => (await fetch(u)).text()", href)
    rows = list(csv.reader(io.StringIO(text)))
    assert ["", "about", "agents", "filter", "ana"] in rows
    assert not [r for r in rows if r[1] == "outcomes" and r[2] == "rejected"]
    assert [r[4] for r in rows if r[0] == day.isoformat() and r[1] == "top_used" and r[3] == "sessions"] == ["1"]
    weekly = [r for r in rows if r[1] == "weekly_learning" and r[3] == "sessions"]
    assert sum(int(r[4]) for r in weekly) == 4  # ana's four sessions, none of the load test's
    # The overview's weekly learning and its daily charts follow the same filter.
    page.goto(f"{site.url}/g/{g}/?agent=ana&agent=-")
    table = page.locator("#learning-table").inner_text()
    assert "load" not in table
    assert sum(int(r.split("\t")[1]) for r in table.splitlines()[2:] if r.strip()) == 4
    page.goto(f"{site.url}/g/{g}/")
    table = page.locator("#learning-table").inner_text()
    assert sum(int(r.split("\t")[1]) for r in table.splitlines()[2:] if r.strip()) == 4 + LOAD_SESSIONS


def test_each_revision_effect_has_its_n_and_95_percent_interval(site, as_user):
    page = as_user("ana")
    page.goto(f"{site.url}/g/{site.data['graph'].pk}/policy/effects/")
    change = page.locator("#policy-effects td.change").first.inner_text()
    assert "n = " in change and "…" in change


# --------------------------------------------------------------------------------------------------
# Item 8: a 390 px screen


def test_no_page_is_wider_than_a_390px_screen(site, browser):
    g, data = site.data["graph"].pk, site.data
    page = browser.new_page(viewport={"width": 390, "height": 844})
    page.goto(f"{site.url}/accounts/login/")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("pw-alice")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{site.url}/", wait_until="domcontentloaded")
    urls = [
        "/",
        f"/g/{g}/",
        f"/g/{g}/explain/",
        f"/g/{g}/injections/{data['injection'].pk}/",
        f"/g/{g}/nodes/{data['nodes']['a'].pk}/",
        f"/g/{g}/sessions/",
        f"/g/{g}/batches/",
        f"/g/{g}/batches/{data['batch'].pk}/",
        f"/g/{g}/audit/",
        f"/g/{g}/impact/",
        f"/g/{g}/tune/",
        f"/g/{g}/policy/effects/",
        f"/g/{g}/members/",
        "/g/999999/",
    ]
    wide = {}
    for url in urls:
        page.goto(site.url + url)
        page.wait_for_load_state("load")
        width = page.evaluate("() => document.documentElement.scrollWidth")
        if width > 390:
            wide[url] = width
    page.close()
    assert wide == {}
