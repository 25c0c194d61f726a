"""Restoring a policy revision in headless Chromium: preview first (htmx), then one click; the effects table loads."""

import pytest

from graphadmin import actions as core_actions
from ranking import service
from tests.browser import chromium, login

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser():
    with chromium() as b:
        yield b


@pytest.mark.parametrize("username", ["oscar", "alice"])
def test_operator_previews_then_restores(request, live_server, browser, rg, username):
    request.getfixturevalue(username)
    g = rg["graph"]
    core_actions.do_set_policy(g, {"coef_vector": 1.1}, actor=request.getfixturevalue("alice"), note="experiment")
    service.assemble_context(g, session_id="e2e", query="vector search in postgres", budget=2)
    page = login(browser, live_server.url, username, f"pw-{username}")
    assert page.goto(f"{live_server.url}/g/{g.pk}/tune/").status == 200
    page.wait_for_selector("#policy-effects table")  # the per-revision share, loaded by htmx
    page.get_by_role("link", name="Preview restoring r1").click()
    page.wait_for_selector("#restore-whatif-summary")
    assert "coef_vector" in page.locator("#restore-preview").inner_text()
    assert g.current_policy().revision == 2  # the preview wrote nothing
    page.get_by_role("button", name="Restore r1").click()
    page.wait_for_selector("text=Restored r1 as r3")
    assert g.current_policy().revision == 3 and g.current_policy().coef_vector == 0.6
    page.close()


@pytest.mark.parametrize("username", ["rita", "ana"])
def test_below_operator_cannot_preview_or_restore(request, live_server, browser, rg, username):
    request.getfixturevalue(username)
    g = rg["graph"].pk
    page = login(browser, live_server.url, username, f"pw-{username}")
    assert page.goto(f"{live_server.url}/g/{g}/tune/revisions/1/preview/").status == 403
    page.close()
