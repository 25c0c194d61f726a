"""Rollbacks people can trust (issue 39, item 3): a preview that reports the counts the rollback then reports, a
partial rollback finished by forcing the values it left (a new rollback batch, audited as a forced finish), and
a rollback that restored nothing said so. The API: the preview readable by every role of the organization, the
finish by operators only, another organization's batch a 404."""

import pytest

from feedback import actions
from feedback.models import UpdateBatch, WeightHistory
from graphadmin.models import AuditEvent


@pytest.fixture
def partial(rg, oscar):
    """A manual batch of two edge weights; a later batch changes the first again (a conflict for its rollback)."""
    g, edges = rg["graph"], rg["edges"]
    first, second = edges["a>b"], next(e for k, e in edges.items() if k != "a>b")
    before = {first.pk: first.weight, second.pk: second.weight}
    result = actions.do_set_weights(
        g,
        [actions.ManualValue("edge", first.pk, "weight", 0.2), actions.ManualValue("edge", second.pk, "weight", 0.7)],
        actor=oscar,
    )
    actions.do_set_weights(g, [actions.ManualValue("edge", first.pk, "weight", 0.3)], actor=oscar)
    return UpdateBatch.objects.get(pk=result.batch_id), first, second, before


def test_the_preview_reports_the_counts_the_rollback_then_reports(partial, oscar):
    batch, first, _second, _before = partial
    preview = actions.preview_rollback(batch)
    assert (preview.edge_updates, preview.node_updates, preview.conflicts, preview.forced_updates) == (1, 0, 1, 1)
    assert preview.conflict_ids == {"edge.weight": [first.pk]} and preview.refused == ""
    first.refresh_from_db()
    assert first.weight == 0.3  # the preview wrote nothing
    assert not UpdateBatch.objects.filter(rollback_of=batch).exists()
    result = actions.do_rollback_batch(batch, actor=oscar)
    assert (result.edge_updates, result.node_updates, result.conflicts) == (1, 0, 1)
    # Once rolled back, a second rollback's preview says why it would be refused.
    assert "already been rolled back" in actions.preview_rollback(batch).refused


def test_a_forced_preview_counts_what_the_forced_rollback_writes(partial, oscar):
    batch, *_ = partial
    preview = actions.preview_rollback(batch)
    result = actions.do_rollback_batch(batch, actor=oscar, force=True)
    assert result.edge_updates == preview.edge_updates + preview.forced_updates


def test_finishing_forces_only_the_values_left_and_is_audited_as_such(partial, oscar):
    batch, first, second, before = partial
    rollback = UpdateBatch.objects.get(pk=actions.do_rollback_batch(batch, actor=oscar).batch_id)
    second.refresh_from_db()
    assert second.weight == before[second.pk]
    # The partial rollback's second value changes again after it: finishing must not touch it.
    actions.do_set_weights(rg_graph(batch), [actions.ManualValue("edge", second.pk, "weight", 0.9)], actor=oscar)
    preview = actions.preview_rollback(batch, finish=True)
    assert (preview.finishing, preview.edge_updates, preview.conflicts) == (rollback.pk, 1, 1)
    result = actions.do_finish_rollback(rollback, actor=oscar)  # named by its rollback: the same batch
    assert (result.edge_updates, result.node_updates) == (preview.edge_updates, preview.node_updates)
    first.refresh_from_db()
    second.refresh_from_db()
    assert first.weight == before[first.pk] and second.weight == 0.9
    batch.refresh_from_db()
    assert batch.status == "rolled_back"
    finish = UpdateBatch.objects.get(pk=result.batch_id)
    assert finish.kind == "rollback" and finish.details["finishes_rollback"] == rollback.pk
    events = list(WeightHistory.objects.filter(graph_id=batch.graph_id, batch=finish).values_list("edge_id", "event"))
    assert events == [(first.pk, "rollback_forced")]
    audit = AuditEvent.objects.filter(action="batch.rollback").order_by("-seq").first()
    assert audit.payload["forced_finish"] is True and audit.payload["finishes_rollback"] == rollback.pk
    # Nothing left to finish: refused.
    with pytest.raises(actions.RollbackRefused):
        actions.do_finish_rollback(batch, actor=oscar)
    # Undoing the finish puts back what it overwrote; the batch is partially rolled back again.
    actions.do_rollback_batch(finish, actor=oscar)
    first.refresh_from_db()
    batch.refresh_from_db()
    assert first.weight == 0.3 and batch.status == "partially_rolled_back"


def rg_graph(batch):
    return batch.graph


def test_a_batch_without_a_partial_rollback_cannot_be_finished(partial, oscar):
    batch, *_ = partial
    assert "no partial rollback to finish" in actions.preview_rollback(batch, finish=True).refused
    with pytest.raises(actions.RollbackRefused):
        actions.do_finish_rollback(batch, actor=oscar)


def test_a_rollback_that_restored_nothing_says_so(rg, oscar):
    edge = rg["edges"]["a>b"]
    result = actions.do_set_weights(rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.2)], actor=oscar)
    actions.do_set_weights(rg["graph"], [actions.ManualValue("edge", edge.pk, "weight", 0.4)], actor=oscar)
    batch = UpdateBatch.objects.get(pk=result.batch_id)
    assert actions.preview_rollback(batch).restores_nothing
    rollback = UpdateBatch.objects.get(pk=actions.do_rollback_batch(batch, actor=oscar).batch_id)
    assert rollback.restored_nothing and rollback.status_text() == "nothing restored"


# --------------------------------------------------------------------------------------------------
# The API: roles and tenancy


@pytest.mark.parametrize("who", ["rita", "ana", "oscar", "alice"])
def test_every_role_reads_the_preview(request, api, partial, who):
    batch, *_ = partial
    body = api(request.getfixturevalue(who)).get(f"/api/batches/{batch.pk}/rollback-preview/").json()
    assert (body["edge_updates"], body["conflicts"], body["forced_updates"], body["refused"]) == (1, 1, 1, "")


def test_the_preview_of_another_organizations_batch_is_a_404_and_a_bad_flag_a_400(api, partial, mallory, rita):
    batch, *_ = partial
    assert api(mallory).get(f"/api/batches/{batch.pk}/rollback-preview/").status_code == 404
    assert api(mallory).post(f"/api/batches/{batch.pk}/finish-rollback/").status_code == 404
    bad = api(rita).get(f"/api/batches/{batch.pk}/rollback-preview/", {"finish": "maybe"})
    assert bad.status_code == 400 and "finish" in bad.json()


@pytest.mark.parametrize("who", ["rita", "ana"])
def test_reviewers_and_analysts_may_not_finish(request, api, partial, oscar, who):
    batch, *_ = partial
    actions.do_rollback_batch(batch, actor=oscar)
    assert api(request.getfixturevalue(who)).post(f"/api/batches/{batch.pk}/finish-rollback/").status_code == 403
    batch.refresh_from_db()
    assert batch.status == "partially_rolled_back"


def test_an_operator_finishes_through_the_api_and_a_second_finish_is_a_409(api, partial, oscar):
    batch, first, _second, before = partial
    actions.do_rollback_batch(batch, actor=oscar)
    preview = api(oscar).get(f"/api/batches/{batch.pk}/rollback-preview/", {"finish": "1"}).json()
    assert preview["edge_updates"] == 1 and preview["finishing"] is not None
    response = api(oscar).post(f"/api/batches/{batch.pk}/finish-rollback/")
    assert response.status_code == 200 and response.json()["edge_updates"] == 1
    first.refresh_from_db()
    assert first.weight == before[first.pk]
    assert api(oscar).post(f"/api/batches/{batch.pk}/finish-rollback/").status_code == 409
