"""Decay: untraversed edges lose weight once per period, toward the floor; chunked; archived untouched."""

from datetime import datetime, timedelta, timezone

import pytest

from feedback import actions
from feedback.models import UpdateBatch, WeightChange
from graphadmin.models import AuditEvent, Edge, EdgeStats

from .conftest import reload

pytestmark = pytest.mark.django_db

LATER = datetime.now(timezone.utc) + timedelta(days=15)  # more than one full 7-day period after creation


def test_untraversed_edges_decay_once_per_period(oscar, acme_graph, edges):
    first = actions.decay(oscar, acme_graph, now=LATER)
    assert first.status == "applied" and first.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(0.475)  # 0.5 * 0.95
    again = actions.decay(oscar, acme_graph, now=LATER + timedelta(seconds=1))
    assert again.status == "duplicate" and again.edge_updates == 0
    assert reload(edges["ab"]).weight == pytest.approx(0.475)
    next_period = actions.decay(oscar, acme_graph, now=LATER + timedelta(days=7))
    assert next_period.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(0.45125)
    assert set(WeightChange.objects.values_list("event", flat=True)) == {"decay"}
    assert AuditEvent.objects.filter(action="graph.decay").count() == 2


def test_floor_archived_and_recently_traversed_are_respected(oscar, acme_graph, edges, small_graph):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.104)
    Edge.objects.filter(pk=edges["bc"].pk).update(archived=True)
    actions.decay(oscar, acme_graph, now=LATER)
    assert reload(edges["ab"]).weight == pytest.approx(0.1)  # 0.104 * 0.95 = 0.0988 -> floor 0.1
    assert reload(edges["bc"]).weight == 0.5
    # At the floor: nothing more to do next period.
    assert actions.decay(oscar, acme_graph, now=LATER + timedelta(days=7)).edge_updates == 0
    # Traversed since the cutoff: untouched.
    Edge.objects.filter(pk=edges["bc"].pk).update(archived=False)
    EdgeStats.objects.create(edge=edges["bc"], graph=acme_graph, last_traversed_at=LATER + timedelta(days=8))
    assert actions.decay(oscar, acme_graph, now=LATER + timedelta(days=14)).edge_updates == 0
    assert reload(edges["bc"]).weight == 0.5


def test_recent_edges_do_not_decay(oscar, acme_graph, edges):
    result = actions.decay(oscar, acme_graph)
    assert result.status == "nothing_to_change" and not UpdateBatch.objects.exists()


def test_chunks_are_separate_batches_and_a_rerun_skips_them(oscar, acme_graph, edges):
    result = actions.decay(oscar, acme_graph, now=LATER, chunk_size=1)
    assert len(result.details["batches"]) == 2
    batches = UpdateBatch.objects.filter(kind="decay").order_by("id")
    assert [b.edge_updates for b in batches] == [1, 1]
    assert [b.details["id_range"] for b in batches] == [[edges["ab"].pk, edges["ab"].pk + 1], [edges["bc"].pk, edges["bc"].pk + 1]]
    rerun = actions.decay(oscar, acme_graph, now=LATER, chunk_size=1)
    assert rerun.details["skipped_chunks"] == 2 and rerun.edge_updates == 0


def test_dry_run_writes_nothing(oscar, acme_graph, edges):
    result = actions.decay(oscar, acme_graph, now=LATER, dry_run=True)
    assert result.status == "dry_run" and result.edge_updates == 2
    preview = actions.decay_preview(acme_graph, now=LATER)
    assert preview["edges"] == 2 and preview["sample"][0]["after"] == pytest.approx(0.475)
    assert not UpdateBatch.objects.exists() and reload(edges["ab"]).weight == 0.5


def test_decay_command_dry_run_and_run(oscar, acme_graph, edges, capsys):
    from django.core.management import call_command

    Edge.objects.update(created_at=datetime.now(timezone.utc) - timedelta(days=30))
    call_command("decay", "--graph", "memory", "--org", "acme", "--dry-run")
    out = capsys.readouterr().out
    assert "2 edge(s) would decay" in out and "0.500000 -> 0.475000" in out and "nothing written" in out
    assert not UpdateBatch.objects.exists()
    call_command("decay", "--graph", "memory")
    assert "2 edge(s) decayed" in capsys.readouterr().out
    assert reload(edges["ab"]).weight == pytest.approx(0.475)
