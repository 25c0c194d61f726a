"""The session pages in headless Chromium, as each role: filter the list, open a session, follow it to its injection."""

import pytest

from feedback import actions
from ranking import service
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

USERS = {"rita": "reviewer", "ana": "analyst", "oscar": "operator", "alice": "admin"}


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.fixture
def sessions(rg, ana):
    g = rg["graph"]
    ctx = service.assemble_context(g, session_id="s-used", query="vector search in postgres", budget=2)
    given = next(c for c in ctx.injection.candidates.all() if c.selected)
    actions.do_record_uses(ctx.injection.session, [actions.UseItem("node", given.node_id, "explicit")], actor=ana)
    actions.do_apply_outcome(g, "s-used", "accepted", actor=ana)
    service.assemble_context(g, session_id="s-open", query="graph decay periods", budget=2)
    return {"graph": g, "injection": ctx.injection}


@pytest.mark.parametrize("username", list(USERS))
def test_each_role_filters_and_follows_a_session(request, live_server, browser, sessions, username):
    request.getfixturevalue(username)
    g = sessions["graph"].pk
    page = login(browser, live_server.url, username, f"pw-{username}")
    assert page.goto(f"{live_server.url}/g/{g}/").status == 200
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Sessions").click()
    page.wait_for_url(f"**/g/{g}/sessions/")
    assert page.locator("#session-list tbody tr").count() == 2
    # Filter by outcome with the keyboard-reachable form.
    page.get_by_label("Outcome").select_option("accepted")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**outcome=accepted**")
    rows = page.locator("#session-list tbody tr")
    assert rows.count() == 1 and "vector search in postgres" in rows.first.inner_text()
    page.get_by_role("link", name="s-used").click()
    page.wait_for_url(f"**/g/{g}/sessions/s-used/")
    timeline = page.get_by_role("list", name="What happened in this session, in time order")
    text = timeline.inner_text()
    assert "vector search in postgres" in text and "Use report" in text and "Outcome: accepted" in text
    assert text.count("Batch #") == 2
    page.get_by_role("link", name=f"injection #{sessions['injection'].pk}").first.click()
    page.wait_for_url(f"**/g/{g}/injections/{sessions['injection'].pk}/")
    page.close()


def test_outsider_gets_404(live_server, browser, sessions, mallory):
    g = sessions["graph"].pk
    page = login(browser, live_server.url, "mallory", "pw-mallory")
    assert page.goto(f"{live_server.url}/g/{g}/sessions/").status == 404
    assert page.goto(f"{live_server.url}/g/{g}/sessions/s-used/").status == 404
    page.close()
