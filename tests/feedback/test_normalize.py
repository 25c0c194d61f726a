"""Normalize (ceiling mode): rescale live edge weights so the maximum is 1.0, as a batch."""

import pytest

from feedback import actions, queries
from feedback.models import UpdateBatch
from graphadmin.models import Edge

from .conftest import reload

pytestmark = pytest.mark.django_db


def test_rescales_so_the_maximum_is_one(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.4)
    Edge.objects.filter(pk=edges["bc"].pk).update(weight=0.2)
    result = actions.do_normalize(acme_graph, actor=oscar, chunk_size=10**9)
    assert result.status == "applied" and result.edge_updates == 2
    assert reload(edges["ab"]).weight == pytest.approx(1.0)
    assert reload(edges["bc"]).weight == pytest.approx(0.5)
    assert UpdateBatch.objects.get(pk=result.batch_id).kind == "normalize"


def test_nothing_to_do_when_the_maximum_is_already_one(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=1.0)
    assert actions.do_normalize(acme_graph, actor=oscar).status == "nothing_to_change"
    assert not UpdateBatch.objects.exists()


def test_archived_edges_are_left_alone(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.25)
    Edge.objects.filter(pk=edges["bc"].pk).update(weight=0.9, archived=True)
    actions.do_normalize(acme_graph, actor=oscar)
    assert reload(edges["ab"]).weight == pytest.approx(1.0)
    assert reload(edges["bc"]).weight == 0.9


def test_chunks_are_batches_and_a_retried_run_skips_them(oscar, acme_graph, edges):
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.4)
    Edge.objects.filter(pk=edges["bc"].pk).update(weight=0.2)
    result = actions.do_normalize(acme_graph, actor=oscar, chunk_size=1, idempotency_key="run-1")
    assert len(result.details["batches"]) == 2 and result.edge_updates == 2
    retried = actions.do_normalize(acme_graph, actor=oscar, chunk_size=1, idempotency_key="run-1")
    assert retried.status == "nothing_to_change"  # the max is 1.0 now
    Edge.objects.filter(pk=edges["ab"].pk).update(weight=0.5)
    again = actions.do_normalize(acme_graph, actor=oscar, chunk_size=1, idempotency_key="run-1")
    assert again.status == "duplicate" and again.details["skipped_chunks"] == 2
    assert reload(edges["ab"]).weight == 0.5


def test_a_large_batch_is_stored_in_blocks_of_bounded_span(oscar, acme_graph, edges, monkeypatch):
    """One chunk over every edge still writes one block per BLOCK_SPAN ids (small lookups later)."""
    from feedback.models import WeightChangeBlock

    monkeypatch.setattr(queries, "BLOCK_SPAN", 1)
    Edge.objects.filter(pk__in=[e.pk for e in edges.values()]).update(weight=0.4)
    result = actions.do_normalize(acme_graph, actor=oscar, chunk_size=10**9)
    blocks = list(WeightChangeBlock.objects.filter(batch_id=result.batch_id).order_by("id_min"))
    assert [b.ids for b in blocks] == [[b.id_min] for b in blocks] and sum(
        b.size for b in blocks
    ) == result.edge_updates
