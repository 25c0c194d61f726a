"""Decay: untraversed edges lose weight once per period, toward the floor; chunked; archived untouched."""

from datetime import UTC, datetime, timedelta

import pytest

from feedback import actions
from feedback.models import UpdateBatch, WeightChange, WeightChangeBlock, WeightHistory
from feedback.queries import reads, weights
from graphadmin.models import AuditEvent, Edge, EdgeStats

from .conftest import reload

pytestmark = pytest.mark.django_db

LATER = datetime.now(UTC) + timedelta(days=15)  # more than one full 7-day period after creation


def test_untraversed_edges_decay_once_per_period(oscar, acme_graph, edges):
    first = actions.do_decay(acme_graph, actor=oscar, now=LATER)
    assert first.status == "applied" and first.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(0.475)  # 0.5 * 0.95
    again = actions.do_decay(acme_graph, actor=oscar, now=LATER + timedelta(seconds=1))
    assert again.status == "duplicate" and again.edge_updates == 0
    assert reload(edges["ab"]).weight == pytest.approx(0.475)
    next_period = actions.do_decay(acme_graph, actor=oscar, now=LATER + timedelta(days=7))
    assert next_period.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(0.45125)
    assert set(WeightHistory.objects.values_list("event", flat=True)) == {"decay"}
    assert AuditEvent.objects.filter(action="graph.decay").count() == 2


def test_floor_archived_and_recently_traversed_are_respected(oscar, acme_graph, edges, small_graph):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.104)
    Edge.objects.filter(pk=edges["bc"].pk).update(archived=True)
    actions.do_decay(acme_graph, actor=oscar, now=LATER)
    assert reload(edges["ab"]).weight == pytest.approx(0.1)  # 0.104 * 0.95 = 0.0988 -> floor 0.1
    assert reload(edges["bc"]).weight == 0.5
    # At the floor: nothing more to do next period.
    assert actions.do_decay(acme_graph, actor=oscar, now=LATER + timedelta(days=7)).edge_updates == 0
    # Traversed since the cutoff: untouched.
    Edge.objects.filter(pk=edges["bc"].pk).update(archived=False)
    EdgeStats.objects.create(edge=edges["bc"], graph=acme_graph, last_traversed_at=LATER + timedelta(days=8))
    assert actions.do_decay(acme_graph, actor=oscar, now=LATER + timedelta(days=14)).edge_updates == 0
    assert reload(edges["bc"]).weight == 0.5


def test_recent_edges_do_not_decay(oscar, acme_graph, edges):
    result = actions.do_decay(acme_graph, actor=oscar)
    assert result.status == "nothing_to_change" and not UpdateBatch.objects.exists()


def test_chunks_are_separate_batches_and_a_rerun_skips_them(oscar, acme_graph, edges):
    result = actions.do_decay(acme_graph, actor=oscar, now=LATER, chunk_size=1)
    assert len(result.details["batches"]) == 2
    batches = UpdateBatch.objects.filter(kind="decay").order_by("id")
    assert [b.edge_updates for b in batches] == [1, 1]
    assert [b.details["id_range"] for b in batches] == [
        [edges["ab"].pk, edges["ab"].pk + 1],
        [edges["bc"].pk, edges["bc"].pk + 1],
    ]
    rerun = actions.do_decay(acme_graph, actor=oscar, now=LATER, chunk_size=1)
    assert rerun.details["skipped_chunks"] == 2 and rerun.edge_updates == 0


def test_dry_run_writes_nothing(oscar, acme_graph, edges):
    result = actions.do_decay(acme_graph, actor=oscar, now=LATER, dry_run=True)
    assert result.status == "dry_run" and result.edge_updates == 2
    preview = weights.decay_preview(acme_graph, now=LATER)
    assert preview["edges"] == 2 and preview["sample"][0]["after"] == pytest.approx(0.475)
    assert not UpdateBatch.objects.exists() and reload(edges["ab"]).weight == 0.5


def test_decay_command_dry_run_and_run(oscar, acme_graph, edges, capsys):
    from django.core.management import call_command

    Edge.objects.update(created_at=datetime.now(UTC) - timedelta(days=30))
    call_command("decay", "--graph", "memory", "--org", "acme", "--dry-run")
    out = capsys.readouterr().out
    assert "2 edge(s) would decay" in out and "0.500000 -> 0.475000" in out and "nothing written" in out
    assert not UpdateBatch.objects.exists()
    call_command("decay", "--graph", "memory")
    assert "2 edge(s) decayed" in capsys.readouterr().out
    assert reload(edges["ab"]).weight == pytest.approx(0.475)


def test_decay_history_is_one_block_per_chunk_read_back_per_edge(oscar, acme_graph, edges, small_graph):
    result = actions.do_decay(acme_graph, actor=oscar, now=LATER)
    block = WeightChangeBlock.objects.get()
    ab, bc = sorted((edges["ab"].pk, edges["bc"].pk))
    assert (block.batch_id, block.target, block.field, block.event, block.size) == (
        result.batch_id,
        "edge",
        "weight",
        "decay",
        2,
    )
    assert (block.ids, block.id_min, block.id_max) == ([ab, bc], ab, bc)
    assert block.before == [0.5, 0.5] and block.after == pytest.approx([0.475, 0.475])
    assert not WeightChange.objects.exists()  # no per-edge rows
    rows = list(WeightHistory.objects.filter(batch_id=result.batch_id).in_order())
    assert [(r.edge_id, r.node_id, r.before, r.change_id, r.block_id) for r in rows] == [
        (ab, None, 0.5, None, block.pk),
        (bc, None, 0.5, None, block.pk),
    ]
    # One edge's history finds its change inside the block, beside its row-stored changes.
    actions.do_record_uses(
        _session(acme_graph, small_graph, edges), [actions.UseItem("edge", ab, "explicit")], actor=oscar
    )
    history = list(reads.history_of(acme_graph, "edge", ab))  # newest first
    assert [h.event for h in history] == ["explicit", "decay"] and history[0].before == pytest.approx(0.475)
    assert (history[1].block_id, history[1].before, history[1].batch.kind) == (block.pk, 0.5, "decay")
    assert [h.event for h in reads.history_of(acme_graph, "edge", bc)] == ["decay"]
    assert not list(reads.history_of(acme_graph, "node", ab))


def test_rolling_back_a_decay_chunk_restores_it_with_block_history(oscar, acme_graph, edges):
    result = actions.do_decay(acme_graph, actor=oscar, now=LATER)
    undo = actions.do_rollback_batch(UpdateBatch.objects.get(pk=result.batch_id), actor=oscar)
    assert (undo.edge_updates, undo.conflicts) == (2, 0)
    assert reload(edges["ab"]).weight == 0.5 and reload(edges["bc"]).weight == 0.5
    block = WeightChangeBlock.objects.get(batch_id=undo.batch_id)
    assert block.event == "rollback" and block.after == [0.5, 0.5]
    redo = actions.do_rollback_batch(
        UpdateBatch.objects.get(pk=undo.batch_id), actor=oscar
    )  # a rollback can itself be rolled back
    assert redo.edge_updates == 2 and reload(edges["ab"]).weight == pytest.approx(0.475)


def test_chunks_cover_only_ranges_holding_the_graphs_edges(acme_graph, edges):
    ab, bc = sorted((edges["ab"].pk, edges["bc"].pk))
    assert weights.chunk_ranges(acme_graph, 1) == [ab, bc]
    assert weights.chunk_ranges(acme_graph, 10**9) == [0]
    Edge.objects.filter(pk=ab).update(archived=True)
    assert weights.chunk_ranges(acme_graph, 1) == [bc]


def _session(graph, small_graph, edges):
    from .conftest import make_session

    return make_session(graph, "decay-then-use", [(small_graph["b"], edges["ab"], True)])
