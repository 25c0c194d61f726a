"""The graph learns links the import did not make: co_used edges between notes used together in accepted sessions."""

from datetime import UTC

import pytest

from feedback import actions
from feedback.actions import UseItem
from feedback.models import UpdateBatch
from feedback.queries import weights
from feedback.tasks import apply_outcome_task
from graphadmin.models import AuditEvent, Edge, Node

from .conftest import make_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def unlinked(acme_graph):
    """Two notes p and q with no edge between them, and a third r."""
    return {k: Node.objects.create(graph=acme_graph, key=k, title=k.upper(), text=f"note {k}") for k in "pqr"}


def accepted_session(graph, name, nodes, oscar, used):
    session = make_session(graph, name, [(n, None, True) for n in nodes.values()])
    actions.do_record_uses(session, [UseItem("node", nodes[k].pk, "explicit") for k in used], actor=oscar)
    return apply_outcome_task(graph.pk, name, "accepted", user_id=oscar.pk)


def co_used(graph):
    return Edge.objects.filter(graph=graph, edge_type__name="co_used")


def test_a_pair_used_together_in_enough_accepted_sessions_is_linked_both_ways(acme_graph, unlinked, oscar):
    p, q = unlinked["p"], unlinked["q"]
    for i in range(2):
        result = accepted_session(acme_graph, f"s{i}", unlinked, oscar, "pq")
        assert result["links"]["status"] == "no_new_links"
    assert not co_used(acme_graph).exists()
    result = accepted_session(acme_graph, "s2", unlinked, oscar, "pq")  # the third (co_use_min_sessions = 3)
    links = result["links"]
    assert links["status"] == "applied" and links["edge_updates"] == 2
    assert {(e.source_id, e.target_id, e.weight, e.edge_type.priority) for e in co_used(acme_graph)} == {
        (p.pk, q.pk, 0.5, 0.0),
        (q.pk, p.pk, 0.5, 0.0),
    }
    batch = UpdateBatch.objects.get(pk=links["batch_id"])
    assert batch.kind == "link" and batch.details["pairs"] == [[p.pk, q.pk, 3]]
    assert sorted(batch.details["created_edges"]) == sorted(co_used(acme_graph).values_list("pk", flat=True))
    assert AuditEvent.objects.filter(action="graph.links.learn", payload__batch=batch.pk).count() == 1
    # Already linked: a fourth session adds nothing.
    assert accepted_session(acme_graph, "s3", unlinked, oscar, "pq")["links"]["status"] == "no_new_links"


def test_only_accepted_sessions_count(acme_graph, unlinked, oscar):
    for i in range(3):
        session = make_session(acme_graph, f"r{i}", [(n, None, True) for n in unlinked.values()])
        actions.do_record_uses(session, [UseItem("node", unlinked[k].pk, "explicit") for k in "pq"], actor=oscar)
        result = apply_outcome_task(acme_graph.pk, f"r{i}", "rework", user_id=oscar.pk)
        assert "links" not in result
    assert weights.co_used_pairs(session, 1) == []
    assert not co_used(acme_graph).exists()


def test_an_existing_edge_either_way_means_no_link(acme_graph, unlinked, oscar):
    from graphadmin.models import EdgeType

    Edge.objects.create(
        graph=acme_graph,
        source=unlinked["q"],
        target=unlinked["p"],
        edge_type=EdgeType.objects.get(graph=acme_graph, name="related"),
    )
    for i in range(3):
        result = accepted_session(acme_graph, f"s{i}", unlinked, oscar, "pq")
    assert result["links"]["status"] == "no_new_links" and not co_used(acme_graph).exists()


def test_rolling_back_a_link_archives_its_edges_and_it_is_not_made_again(acme_graph, unlinked, oscar):
    for i in range(3):
        result = accepted_session(acme_graph, f"s{i}", unlinked, oscar, "pq")
    batch = UpdateBatch.objects.get(pk=result["links"]["batch_id"])
    undo = actions.do_rollback_batch(batch, actor=oscar)
    assert undo.edge_updates == 2 and all(e.archived for e in co_used(acme_graph))
    assert UpdateBatch.objects.get(pk=batch.pk).status == "rolled_back"
    with pytest.raises(actions.RollbackRefused):
        actions.do_rollback_batch(batch, actor=oscar)
    assert accepted_session(acme_graph, "s9", unlinked, oscar, "pq")["links"]["status"] == "no_new_links"
    redo = actions.do_rollback_batch(UpdateBatch.objects.get(pk=undo.batch_id), actor=oscar)
    assert redo.edge_updates == 2 and not any(e.archived for e in co_used(acme_graph))
    again = actions.do_rollback_batch(UpdateBatch.objects.get(pk=redo.batch_id), actor=oscar)
    assert again.edge_updates == 2 and all(e.archived for e in co_used(acme_graph))


def test_co_used_edges_decay_like_every_edge(acme_graph, unlinked, oscar):
    from datetime import datetime, timedelta

    for i in range(3):
        accepted_session(acme_graph, f"s{i}", unlinked, oscar, "pq")
    actions.do_decay(acme_graph, actor=oscar, now=datetime.now(UTC) + timedelta(days=15), chunk_size=10**9)
    assert [e.weight for e in co_used(acme_graph)] == [pytest.approx(0.475)] * 2
