"""The dashboard in headless Chromium, as each role: pages open, charts are drawn, tuning and rollback work.

Charts count as drawn only when plotly has rendered its SVG (``svg.main-svg``), not when the div exists.
"""

from datetime import date

import pytest

from feedback import actions, metrics
from feedback.models import UpdateBatch
from graphadmin.models import EdgeType
from graphadmin_client import RetrievalRequest
from ranking.context import assemble_context
from ranking.retrieval import prepare
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def activity(rg, oscar, ana):
    """A session with an injection, a use, a manual batch and today's rollup."""
    g, nodes, edges = rg["graph"], rg["nodes"], rg["edges"]
    ctx = assemble_context(
        prepare(
            g,
            RetrievalRequest(session="s-e2e", query="vector search in postgres", start_nodes=[nodes["a"].pk], budget=3),
        )
    )
    actions.do_record_uses(ctx.injection.session, [actions.UseItem("edge", edges["a>b"].pk, "explicit")], actor=ana)
    manual = actions.do_set_weights(
        g, [actions.ManualValue("edge", edges["a>c"].pk, "weight", 0.25)], actor=oscar, reason="e2e"
    )
    metrics.rollup(g, date.today())
    return {"injection": ctx.injection, "batch": UpdateBatch.objects.get(pk=manual.batch_id), "edge": edges["a>c"]}


def _pages(rg, activity):
    g = rg["graph"].pk
    return {
        "overview": (f"/g/{g}/", "reviewer", True),
        "explain": (f"/g/{g}/explain/", "reviewer", False),
        "injection": (f"/g/{g}/injections/{activity['injection'].pk}/", "reviewer", True),
        "node": (f"/g/{g}/nodes/{rg['nodes']['b'].pk}/", "reviewer", False),
        "edge": (f"/g/{g}/edges/{activity['edge'].pk}/", "reviewer", True),
        "batches": (f"/g/{g}/batches/", "reviewer", False),
        "batch": (f"/g/{g}/batches/{activity['batch'].pk}/", "reviewer", True),
        "audit": (f"/g/{g}/audit/", "reviewer", False),
        "impact": (f"/g/{g}/impact/", "analyst", True),
        "tune": (f"/g/{g}/tune/", "operator", False),
    }


ROLE_ORDER = ["reviewer", "analyst", "operator", "admin"]
USERS = {"rita": "reviewer", "ana": "analyst", "oscar": "operator", "alice": "admin"}


@pytest.mark.parametrize("username", list(USERS))
def test_each_role_opens_its_pages_and_sees_charts(request, live_server, browser, rg, activity, username):
    request.getfixturevalue(username)
    role = USERS[username]
    page = login(browser, live_server.url, username, f"pw-{username}")
    for name, (url, needed, has_chart) in _pages(rg, activity).items():
        response = page.goto(live_server.url + url)
        allowed = ROLE_ORDER.index(role) >= ROLE_ORDER.index(needed)
        assert response.status == (200 if allowed else 403), (username, name)
        if allowed and has_chart:
            page.wait_for_selector("div.chart svg.main-svg", timeout=15000)
    page.goto(f"{live_server.url}/g/{rg['graph'].pk}/")
    nav = page.get_by_role("navigation", name="Main")
    assert (nav.get_by_role("link", name="Feedback impact").count() == 1) == (role != "reviewer")
    assert (nav.get_by_role("link", name="Edge types & policy").count() == 1) == (role in ("operator", "admin"))
    page.close()


def test_outsider_gets_404_on_every_page(live_server, browser, rg, activity, mallory):
    page = login(browser, live_server.url, "mallory", "pw-mallory")
    for name, (url, _needed, _chart) in _pages(rg, activity).items():
        assert page.goto(live_server.url + url).status == 404, name
    page.close()


def test_operator_previews_and_saves_a_priority(live_server, browser, rg, activity, oscar):
    g = rg["graph"]
    related = EdgeType.objects.get(graph=g, name="related")
    page = login(browser, live_server.url, "oscar", "pw-oscar")
    page.goto(f"{live_server.url}/g/{g.pk}/tune/")
    page.get_by_label("Priority of related").fill("-1")
    page.get_by_label("coef_priority").fill("3")
    page.get_by_role("button", name="Preview what-if").click()
    summary = page.locator("#whatif-summary")
    summary.wait_for(timeout=15000)
    assert "Replayed" in summary.inner_text() and "top-1 flip" in summary.inner_text()
    related.refresh_from_db()
    assert related.priority == 0.0  # the preview wrote nothing
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("ul.messages")
    related.refresh_from_db()
    assert related.priority == -1.0 and g.current_policy().coef_priority == 3.0
    page.close()


def test_operator_rolls_back_with_one_click(live_server, browser, rg, activity, oscar):
    batch, edge = activity["batch"], activity["edge"]
    page = login(browser, live_server.url, "oscar", "pw-oscar")
    page.goto(f"{live_server.url}/g/{rg['graph'].pk}/batches/{batch.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Roll back this batch").click()
    page.wait_for_selector("ul.messages")
    assert "Rolled back batch" in page.locator("ul.messages").inner_text()
    edge.refresh_from_db()
    assert edge.weight == 0.6
    assert f"rolls back #{batch.pk}" in page.locator("p.meta").inner_text()
    page.close()


def test_reviewer_sees_no_button_and_the_endpoint_refuses(live_server, browser, rg, activity, rita):
    batch = activity["batch"]
    page = login(browser, live_server.url, "rita", "pw-rita")
    page.goto(f"{live_server.url}/g/{rg['graph'].pk}/batches/{batch.pk}/")
    assert page.get_by_role("button", name="Roll back this batch").count() == 0
    status = page.evaluate(
        """async (url) => {
            const token = document.cookie.split('; ').find(c => c.startsWith('csrftoken=')).split('=')[1];
            const r = await fetch(url, {method: 'POST', headers: {'X-CSRFToken': token}});
            return r.status;
        }""",
        f"{live_server.url}/g/{rg['graph'].pk}/batches/{batch.pk}/rollback/",
    )
    assert status == 403
    activity["edge"].refresh_from_db()
    assert activity["edge"].weight == 0.25
    page.close()


def test_pages_are_keyboard_usable(live_server, browser, rg, activity, oscar):
    """Tab reaches the navigation links and form controls; every input has a label."""
    page = login(browser, live_server.url, "oscar", "pw-oscar")
    page.goto(f"{live_server.url}/g/{rg['graph'].pk}/tune/")
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
              .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')).map(el => el.name)"""
    )
    assert unlabelled == []
    focused = set()
    for _ in range(12):
        page.keyboard.press("Tab")
        focused.add(page.evaluate("document.activeElement.textContent.trim() || document.activeElement.name"))
    assert "Overview" in focused and "Explain" in focused
    page.close()
