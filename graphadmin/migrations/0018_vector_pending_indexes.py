from django.db import migrations, models


class Migration(migrations.Migration):
    """Partial indexes over the nodes and edges still without their vector (not archived): a graph's
    ``vectors_pending`` (graphadmin.readiness) is counted from them, one probe of an empty index when the
    graph is ready (the edges' by type: the question-evidence edges, vectorless by design, are skipped as a
    range). Neither references a column a weight write changes, so those updates stay HOT."""

    dependencies = [
        ("graphadmin", "0017_graph_evidence_similarity"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="edge",
            index=models.Index(
                condition=models.Q(("archived", False), ("triplet_embedding__isnull", True)),
                fields=["graph", "edge_type"],
                name="edge_vector_pending",
            ),
        ),
        migrations.AddIndex(
            model_name="node",
            index=models.Index(
                condition=models.Q(("archived", False), ("embedding__isnull", True)),
                fields=["graph"],
                name="node_vector_pending",
            ),
        ),
    ]
