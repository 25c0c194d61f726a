"""A rollback that leaves some of a batch's changes as they were (conflicts) stores the batch as partially
rolled back: on its page, in the batch list and its filter, in the API; refused a second rollback like a
rolled-back batch. Forced, or without conflicts, the batch is rolled back."""

import pytest

from feedback import actions
from feedback.models import UpdateBatch


@pytest.fixture
def two_edge_batch(rg, oscar):
    """A manual batch of two edge weights; a later batch changes one of them again."""
    g, edges = rg["graph"], rg["edges"]
    first, second = edges["a>b"], next(e for k, e in edges.items() if k != "a>b")
    result = actions.do_set_weights(
        g,
        [actions.ManualValue("edge", first.pk, "weight", 0.2), actions.ManualValue("edge", second.pk, "weight", 0.7)],
        actor=oscar,
    )
    actions.do_set_weights(g, [actions.ManualValue("edge", first.pk, "weight", 0.3)], actor=oscar)
    return UpdateBatch.objects.get(pk=result.batch_id), first, second


def test_conflicts_left_alone_store_partially_rolled_back(rg, oscar, two_edge_batch):
    batch, first, second = two_edge_batch
    result = actions.do_rollback_batch(batch, actor=oscar)
    batch.refresh_from_db()
    assert result.conflicts == 1 and batch.status == "partially_rolled_back"
    first.refresh_from_db()
    assert first.weight == 0.3  # left as it was
    with pytest.raises(actions.RollbackRefused):
        actions.do_rollback_batch(batch, actor=oscar)
    # The rollback batch itself is applied, and rolling it back (no conflict) marks it rolled back.
    undo = UpdateBatch.objects.get(pk=result.batch_id)
    assert undo.status == "applied"
    actions.do_rollback_batch(undo, actor=oscar)
    undo.refresh_from_db()
    assert undo.status == "rolled_back"


def test_forced_or_clean_rollbacks_are_rolled_back(rg, oscar, two_edge_batch):
    batch, first, _second = two_edge_batch
    actions.do_rollback_batch(batch, actor=oscar, force=True)
    batch.refresh_from_db()
    assert batch.status == "rolled_back"
    first.refresh_from_db()
    assert first.weight != 0.3


def test_the_pages_show_and_filter_the_status(client, rg, oscar, rita, two_edge_batch):
    batch, _first, _second = two_edge_batch
    clean = actions.do_set_weights(
        rg["graph"], [actions.ManualValue("node", rg["nodes"]["a"].pk, "feedback_weight", 0.9)], actor=oscar
    )
    actions.do_rollback_batch(batch, actor=oscar)
    actions.do_rollback_batch(UpdateBatch.objects.get(pk=clean.batch_id), actor=oscar)
    g = rg["graph"].pk
    client.force_login(rita)
    page = client.get(f"/g/{g}/batches/{batch.pk}/").content.decode()
    assert '<strong class="batch-status">partially rolled back</strong>' in page
    assert 'id="conflict-table"' in page and "Partially rolled back: 1 value(s) left as they were" in page
    listed = client.get(f"/g/{g}/batches/?status=partially_rolled_back")
    ids = [b.pk for b in listed.context["page"].object_list]
    assert ids == [batch.pk]
    assert '<option value="partially_rolled_back" selected>partially rolled back</option>' in listed.content.decode()
    assert [b.pk for b in client.get(f"/g/{g}/batches/?status=rolled_back").context["page"].object_list] == [
        clean.batch_id
    ]
    bad = client.get(f"/g/{g}/batches/?status=undone")
    assert bad.status_code == 200 and "status: expected one of applied, rolled_back, partially_rolled_back" in (
        bad.content.decode()
    )


def test_the_api_lists_and_filters_the_status(api, rg, oscar, two_edge_batch):
    batch, _first, _second = two_edge_batch
    actions.do_rollback_batch(batch, actor=oscar)
    body = api(oscar).get("/api/batches/", {"graph": rg["graph"].pk, "status": "partially_rolled_back"}).json()
    assert [b["id"] for b in body["results"]] == [batch.pk]
    assert body["results"][0]["status"] == "partially_rolled_back"
