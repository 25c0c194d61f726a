"""Constraints hold in the database itself: raw SQL that breaks a rule is refused."""

import pytest
from django.db import DataError, IntegrityError, InternalError, ProgrammingError, connection, transaction

from feedback.models import UpdateBatch, WeightChange
from graphadmin import audit
from graphadmin.models import Edge, EdgeType, Node

REFUSED = (IntegrityError, InternalError, ProgrammingError, DataError)


def _raw(sql, params=()):
    with transaction.atomic(), connection.cursor() as cur:
        cur.execute(sql, params)


@pytest.mark.parametrize(
    "column, value", [("weight", 1.5), ("weight", -0.1), ("feedback_weight", 2.0), ("weight", float("nan"))]
)
def test_edge_weights_stay_in_unit_interval(small_graph, column, value):
    edge = Edge.objects.first()
    with pytest.raises(REFUSED):
        _raw(f"UPDATE graphadmin_edge SET {column} = %s WHERE id = %s", [value, edge.pk])


def test_node_feedback_weight_in_unit_interval(small_graph):
    with pytest.raises(REFUSED):
        _raw("UPDATE graphadmin_node SET feedback_weight = 1.2 WHERE id = %s", [small_graph["a"].pk])


def test_one_edge_per_triplet(small_graph):
    edge = Edge.objects.first()
    with pytest.raises(IntegrityError):
        _raw(
            "INSERT INTO graphadmin_edge (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight, "
            "archived, created_at, updated_at)"
            " VALUES (%s, %s, %s, %s, 0.5, 0.5, false, now(), now())",
            [edge.graph_id, edge.source_id, edge.target_id, edge.edge_type_id],
        )


def test_edge_ends_and_type_belong_to_its_graph(acme_graph, small_graph, globex_graph):
    foreign_node = Node.objects.create(graph=globex_graph, key="f", title="F")
    foreign_type = EdgeType.objects.get(graph=globex_graph, name="related")
    local_type = EdgeType.objects.get(graph=acme_graph, name="related")
    insert = (
        "INSERT INTO graphadmin_edge (graph_id, source_id, target_id, edge_type_id, weight, feedback_weight, archived, "
        "created_at, updated_at)"
        " VALUES (%s, %s, %s, %s, 0.5, 0.5, false, now(), now())"
    )
    with pytest.raises(IntegrityError):
        _raw(insert, [acme_graph.pk, small_graph["a"].pk, foreign_node.pk, local_type.pk])
    with pytest.raises(IntegrityError):
        _raw(insert, [acme_graph.pk, foreign_node.pk, small_graph["a"].pk, local_type.pk])
    with pytest.raises(IntegrityError):
        _raw(insert, [acme_graph.pk, small_graph["a"].pk, small_graph["c"].pk, foreign_type.pk])


def test_external_key_unique_per_graph(acme_graph, small_graph, globex_graph):
    Node.objects.create(graph=globex_graph, key="a", title="same key, other graph is fine")
    with pytest.raises(IntegrityError):
        _raw(
            "INSERT INTO graphadmin_node (graph_id, key, kind, title, text, source, aliases, tags, content_hash, "
            "feedback_weight, archived, created_at, updated_at)"
            " VALUES (%s, 'a', 'note', 'dup', '', '', '[]', '[]', '', 0.5, false, now(), now())",
            [acme_graph.pk],
        )


def test_policy_numbers_checked_in_database(acme_graph):
    with pytest.raises(IntegrityError):
        _raw("UPDATE graphadmin_policyrevision SET learning_rate = 0.9 WHERE graph_id = %s", [acme_graph.pk])


def test_audit_events_refuse_update_and_delete(acme, alice):
    audit.append(acme, alice, "test.event", {})
    with pytest.raises(REFUSED, match="append-only"):
        _raw("UPDATE graphadmin_auditevent SET action = 'x'")
    with pytest.raises(REFUSED, match="append-only"):
        _raw("DELETE FROM graphadmin_auditevent")


def test_weight_changes_refuse_update_and_delete(acme_graph, small_graph):
    from django.utils import timezone

    batch = UpdateBatch.objects.create(graph=acme_graph, kind="manual", started_at=timezone.now())
    edge = Edge.objects.first()
    WeightChange.objects.create(batch=batch, graph=acme_graph, edge=edge, field="weight", before=0.5, after=0.6)
    with pytest.raises(REFUSED, match="append-only"):
        _raw("UPDATE feedback_weightchange SET after = 0.9")
    with pytest.raises(REFUSED, match="append-only"):
        _raw("DELETE FROM feedback_weightchange")


def test_edge_table_fillfactor_is_50(db):
    with connection.cursor() as cur:
        cur.execute("SELECT reloptions FROM pg_class WHERE relname = 'graphadmin_edge'")
        assert "fillfactor=50" in cur.fetchone()[0]


def test_hnsw_indexes_exist(db):
    with connection.cursor() as cur:
        cur.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE indexname IN ('node_embedding_hnsw', 'edge_triplet_hnsw')"
        )
        rows = dict(cur.fetchall())
    assert set(rows) == {"node_embedding_hnsw", "edge_triplet_hnsw"}
    assert all("hnsw" in d and "vector_cosine_ops" in d for d in rows.values())
