"""`make run` opens on the demo vault, imported once and kept up to date without duplicate batches."""

from feedback.harness.demo import ensure_demo
from feedback.models import UpdateBatch
from graphadmin.models import AuditEvent, Edge, Node


def test_demo_imports_the_vault_once(db):
    graph, password = ensure_demo()
    nodes = Node.objects.filter(graph=graph, archived=False)
    assert 40 <= nodes.count() <= 80
    assert not nodes.filter(embedding__isnull=True).exists()
    edges = Edge.objects.filter(graph=graph, archived=False)
    types = set(edges.values_list("edge_type__name", flat=True))
    assert {"related", "derived_from", "depends_on"} <= types
    batch = UpdateBatch.objects.get(graph=graph, kind="import")
    assert batch.details["counts"]["unresolved_links"] == 0 and batch.details["unresolved"] == []
    assert set(nodes.values_list("kind", flat=True)) >= {"decision", "research", "meeting", "component", "phase"}
    adr = nodes.get(key="Decisions/ADR-001 Kafka as the event bus")
    assert adr.aliases == ["ADR-001"]
    assert edges.filter(source=adr, target__key="Research/Kafka vs RabbitMQ", edge_type__name="derived_from").exists()

    again, _ = ensure_demo()
    assert again == graph
    assert UpdateBatch.objects.filter(graph=graph).count() == 1
    assert AuditEvent.objects.filter(action="graph.import").count() == 1
    assert Node.objects.filter(graph=graph).count() == nodes.count()
