"""Issue 25's last two items in headless Chromium, as each role: an edge-type priority change is a policy
revision (with the note typed beside it) that is listed, marked on the learning chart, measured by "did it
help" and restored with its revision; a rollback that leaves conflicts alone stores the batch as partially
rolled back, shown on its page and in the batch list, and filterable.

The rows are those of tests/system/test_dashboard_roles_e2e.py (``build``: r1, and r2 "more similarity"
three weeks ago), plus a manual batch of two edge weights, one of which a later batch changed again. The
tests that write run last, in file order: the operator's priority change (r3), the admin's restore of r2 (r4),
the operator's rollback.
"""

from __future__ import annotations

import pytest

from feedback import actions
from feedback.models import UpdateBatch
from graphadmin.models import EdgeType, PolicyRevision
from tests.conftest import HASHING
from tests.system.site import module_site
from tests.system.test_dashboard_roles_e2e import USERS, build

pytestmark = pytest.mark.browser

NOTE = "dependencies first"


def build_with_batch() -> dict:
    data = build()
    graph, oscar = data["graph"], data["users"]["oscar"]
    first, second = data["edges"]["a>b"], next(e for k, e in data["edges"].items() if k not in ("a>b", "a>f"))
    result = actions.do_set_weights(
        graph,
        [actions.ManualValue("edge", first.pk, "weight", 0.2), actions.ManualValue("edge", second.pk, "weight", 0.7)],
        actor=oscar,
    )
    actions.do_set_weights(graph, [actions.ManualValue("edge", first.pk, "weight", 0.3)], actor=oscar)
    data["batch"] = UpdateBatch.objects.get(pk=result.batch_id)
    data["conflicting_edge"] = first
    return data


_live_server_helper, site, browser = module_site(build_with_batch, EMBEDDER=HASHING)


def _depends_on(site):
    return EdgeType.objects.get(graph=site.data["graph"], name="depends_on")


# --------------------------------------------------------------------------------------------------
# Priority sets versioned with the policy


@pytest.mark.parametrize("username", ["rita", "ana"])
def test_below_operator_no_priority_form(site, as_user, username):
    g = site.data["graph"].pk
    page = as_user(username)
    assert page.goto(f"{site.url}/g/{g}/tune/").status == 403
    assert USERS[username] in page.locator(".error-reason").inner_text()
    assert PolicyRevision.objects.filter(graph_id=g).count() == 2


def test_the_operator_changes_a_priority_with_a_note_and_it_is_a_revision(site, as_user):
    g = site.data["graph"].pk
    page = as_user("oscar")
    page.goto(f"{site.url}/g/{g}/tune/")
    page.get_by_label("Priority of depends_on").fill("0.5")
    page.get_by_label("Note for the revision").fill(NOTE)
    page.get_by_role("button", name="Save").click()
    page.wait_for_selector("text=Saved as r3: 0 policy value(s), 1 priority(ies).")
    assert _depends_on(site).priority == 0.5
    r3 = PolicyRevision.objects.get(graph_id=g, revision=3)
    assert r3.note == NOTE and r3.priority_set()[_depends_on(site).pk] == 0.5
    # Listed among the revisions, with the note and what changed.
    top = page.locator("#revisions tbody tr").first.inner_text()
    assert "r3" in top and NOTE in top and "priority depends_on: 0.0 → 0.5" in top
    # "Did it help?" (loaded on the tune page) lists it with its change.
    page.wait_for_selector("#policy-effects table")
    effects = page.locator("#policy-effects tbody tr").first.inner_text()
    assert "r3" in effects and NOTE in effects and "priority depends_on 0.0 → 0.5" in effects
    # Marked on the learning chart, named in its table.
    page.goto(f"{site.url}/g/{g}/")
    section = page.locator("#learning-glance")
    section.locator("div.chart svg.main-svg").first.wait_for(timeout=15000)
    labels = [t.strip() for t in section.locator("g.annotation").all_text_contents()]
    assert "policy r3" in labels
    assert f"policy r3 ({NOTE})" in section.locator("#learning-table").inner_text()


def test_the_analyst_measures_the_priority_revision(site, as_user):
    g = site.data["graph"].pk
    page = as_user("ana")
    assert page.goto(f"{site.url}/g/{g}/policy/effects/").status == 200
    rows = page.locator("#policy-effects tbody tr")
    assert rows.count() == 3
    assert "priority depends_on 0.0 → 0.5" in rows.first.inner_text()


def test_the_admin_restores_the_revision_before_the_priority_change(site, as_user):
    g = site.data["graph"].pk
    page = as_user("alice")
    page.goto(f"{site.url}/g/{g}/tune/")
    page.get_by_role("link", name="Preview restoring r2").click()
    page.wait_for_selector("#restore-whatif-summary")
    preview = page.locator("#restore-preview")
    row = preview.locator("tr.priority-change")
    assert row.count() == 1 and "depends_on" in row.inner_text() and "0.5" in row.inner_text()
    assert PolicyRevision.objects.filter(graph_id=g).count() == 3  # the preview wrote nothing
    page.get_by_role("button", name="Restore r2").click()
    page.wait_for_selector("text=Restored r2 as r4: 0 value(s) and 1 priority(ies) changed (restore r2).")
    assert _depends_on(site).priority == 0.0
    assert page.get_by_label("Priority of depends_on").input_value() in ("0.0", "0")


# --------------------------------------------------------------------------------------------------
# Partially rolled back


def test_the_operator_rolls_back_and_the_batch_is_partially_rolled_back(site, as_user):
    g, batch = site.data["graph"].pk, site.data["batch"]
    page = as_user("oscar")
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/")
    assert page.locator(".batch-status").inner_text() == "applied"
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Roll back this batch").click()
    page.wait_for_selector("#conflict-table")
    assert UpdateBatch.objects.get(pk=batch.pk).status == "partially_rolled_back"
    page.goto(f"{site.url}/g/{g}/batches/{batch.pk}/")
    assert page.locator("strong.batch-status").inner_text() == "partially rolled back"
    assert "Partially rolled back: 1 value(s) left as they were" in page.locator(".conflicts").inner_text()
    assert page.get_by_role("button", name="Roll back this batch").count() == 0


@pytest.mark.parametrize("username", list(USERS))
def test_every_role_sees_and_filters_partially_rolled_back(site, as_user, username):
    g, batch = site.data["graph"].pk, site.data["batch"]
    page = as_user(username)
    page.goto(f"{site.url}/g/{g}/batches/")
    page.get_by_label("Status").select_option(label="partially rolled back")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=partially_rolled_back**", wait_until="domcontentloaded")
    rows = page.locator("table tbody tr")
    assert rows.count() == 1 and f"#{batch.pk}" in rows.first.inner_text()
    assert rows.first.locator("td.batch-status").inner_text() == "partially rolled back"
    page.get_by_label("Status").select_option(label="rolled back")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=rolled_back**", wait_until="domcontentloaded")
    assert f"#{batch.pk}" not in page.locator("table tbody").inner_text()
