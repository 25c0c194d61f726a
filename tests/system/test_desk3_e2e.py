"""Issue 39 items 1-3 in headless Chromium: the what-if that re-runs retrieval and names what it cannot model,
picked sessions and the policy's numbers under plain headings (operators); learning health, linked from the
overview, for every role; rollbacks previewed, finished when partial, undone as "undo this rollback", and a
rollback that restored nothing saying so.

The rows are those of tests/system/test_dashboard_roles_e2e.py (``build``: acme's cast on the ranked graph
with three weeks of sessions), plus two manual batches for the rollback tests.
"""

from __future__ import annotations

import pytest

from feedback import actions
from feedback.models import UpdateBatch
from tests.conftest import HASHING
from tests.system.site import module_site
from tests.system.test_dashboard_roles_e2e import USERS, build

pytestmark = pytest.mark.browser


def build_with_batches() -> dict:
    data = build()
    graph, oscar = data["graph"], data["users"]["oscar"]
    first, second = data["edges"]["a>b"], data["edges"]["a>c"]
    # A batch of two link weights, one changed again since: its rollback is partial.
    two = actions.do_set_weights(
        graph,
        [actions.ManualValue("edge", first.pk, "weight", 0.21), actions.ManualValue("edge", second.pk, "weight", 0.71)],
        actor=oscar,
    )
    actions.do_set_weights(graph, [actions.ManualValue("edge", first.pk, "weight", 0.33)], actor=oscar)
    # A batch of one weight changed again since: its rollback restores nothing.
    third = data["edges"]["a>d"]
    one = actions.do_set_weights(graph, [actions.ManualValue("edge", third.pk, "weight", 0.44)], actor=oscar)
    actions.do_set_weights(graph, [actions.ManualValue("edge", third.pk, "weight", 0.55)], actor=oscar)
    data["partial"] = UpdateBatch.objects.get(pk=two.batch_id)
    data["nothing"] = UpdateBatch.objects.get(pk=one.batch_id)
    return data


_live_server_helper, site, browser = module_site(build_with_batches, EMBEDDER=HASHING)


# --------------------------------------------------------------------------------------------------
# Item 2: learning health, every role


@pytest.mark.parametrize("username", list(USERS))
def test_learning_health_is_linked_from_the_overview_and_names_the_inert_parts(site, as_user, username):
    g = site.data["graph"].pk
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/")
    page.get_by_role("link", name="Learning health").click()
    page.wait_for_url(f"{site.url}/g/{g}/health/", wait_until="domcontentloaded")
    assert page.get_by_role("heading", name="Learning health").count() == 1
    rows = page.locator("#health-components tbody tr")
    assert rows.count() >= 10
    # No caller sent a persona: that part of the score changed no ranking, and the page says so in words.
    persona = page.locator("#health-components tr[data-component=persona]")
    assert "inert" in persona.inner_text()
    flags = page.locator("#health-flags li").all_inner_texts()
    assert any("The caller's persona (persona) has changed no ranking in the last" in f for f in flags), flags
    assert "reached by following a link" in page.locator("#health-reach").inner_text()
    assert page.locator("#health-entry tbody tr").count() >= 2  # how candidates entered: at least two ways
    assert page.locator("#health-edge-types tbody tr").count() >= 3


# --------------------------------------------------------------------------------------------------
# Item 1: the what-if (operators)


def test_the_whatif_re_runs_retrieval_names_what_it_cannot_model_and_takes_a_selection(site, as_user):
    g = site.data["graph"].pk
    page = as_user("oscar")
    page.goto(f"{site.url}/g/{g}/tune/")
    for heading in ("Finding candidates", "Following links", "Scoring a note", "Learning from use", "Forgetting"):
        assert page.locator("legend", has_text=heading).count() == 1, heading
    page.get_by_label("Links followed at most").fill("1")
    page.get_by_label("Weight kept per period when unused").fill("0.8")
    page.get_by_label("Last sessions").fill("2")
    page.get_by_role("button", name="Preview what-if").click()
    summary = page.locator("#whatif-summary")
    summary.wait_for(timeout=20000)
    text = summary.inner_text()
    assert "retrieval re-run" in text and "max_hops" in text and "of 2 logged session(s)" in text
    assert "0 moved" not in text
    not_modelled = page.locator("#whatif-summary-not-modelled").inner_text()
    assert "decay_rate" in not_modelled and "decay is not simulated here" in not_modelled
    assert "Where the first used item ranks" in page.locator("#whatif .first-used-rank").inner_text()
    # A selection that names nobody: the field named, nothing replayed.
    page.get_by_label("Agent (user name)").fill("nobody")
    page.get_by_role("button", name="Preview what-if").click()
    page.locator("#whatif .error").wait_for(timeout=20000)
    assert "agent" in page.locator("#whatif .error").inner_text()


# --------------------------------------------------------------------------------------------------
# Item 3: rollbacks people can trust (these write: last in the module)


def test_a_reviewer_previews_a_rollback_but_is_offered_no_form(site, as_user):
    g, batch = site.data["graph"].pk, site.data["partial"]
    page = as_user("rita")
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/")
    page.get_by_role("link", name="Preview what it would restore").click()
    preview = page.locator("#rollback-preview")
    preview.wait_for(timeout=15000)
    assert "1 edge and 0 node value(s) would be restored" in preview.inner_text()
    assert "1 conflict(s)" in preview.inner_text()
    assert "Changed since, so left alone: Architecture -related-> Ranking (weight)" in preview.inner_text()
    assert page.get_by_role("button", name="Roll back this batch").count() == 0


def test_an_operator_previews_rolls_back_in_part_and_finishes(site, as_user):
    g, batch = site.data["graph"].pk, site.data["partial"]
    page = as_user("oscar")
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/?preview=1")
    assert "1 edge and 0 node value(s) would be restored" in page.locator("#rollback-preview").inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Roll back this batch").click()
    page.wait_for_selector("ul.messages")
    assert (
        "only in part: 1 edge and 0 node value(s) restored; 1 conflict(s)" in page.locator("ul.messages").inner_text()
    )
    # The rollback's own page offers to undo it, not the generic form, and to finish it.
    assert page.get_by_role("button", name="Undo this rollback").count() == 1
    assert page.get_by_role("button", name="Roll back this batch").count() == 0
    assert "Finishing would force 1 edge and 0 node value(s)" in page.locator("#finish-preview").inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Finish the rollback: force the 1 value(s) left").click()
    page.wait_for_selector("ul.messages")
    assert (
        f"Finished the rollback of batch #{batch.pk}: forced 1 edge and 0 node value(s)"
        in page.locator("ul.messages").inner_text()
    )
    assert "finishes the partial rollback" in page.locator("p.meta").first.inner_text()
    assert page.get_by_role("button", name="Undo this forced finish").count() == 1
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/")
    assert page.locator("strong.batch-status").inner_text() == "rolled back"
    batch.refresh_from_db()
    assert batch.status == "rolled_back"


def test_a_rollback_that_restored_nothing_says_so(site, as_user):
    g, batch = site.data["graph"].pk, site.data["nothing"]
    page = as_user("oscar")
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/?preview=1")
    assert "Nothing would be restored" in page.locator("#rollback-preview").inner_text()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Roll back this batch").click()
    page.wait_for_selector("ul.messages")
    assert "nothing restored" in page.locator("ul.messages").inner_text()
    assert page.locator("strong.batch-status").inner_text() == "nothing restored"
    page.goto(f"{site.url}/g/{g}/batches/")
    rollback = UpdateBatch.objects.get(rollback_of=batch)
    row = page.locator("tr", has=page.locator(f"a[href='/g/{g}/batches/{rollback.pk}/']"))
    assert "nothing restored" in row.inner_text()
