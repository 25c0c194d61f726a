"""Edges: the graph_id index becomes (graph_id, id).

It serves every graph_id lookup the single-column index served, and it walks one graph's edge ids in
order: the chunked actions (decay, normalize) find the id ranges holding a graph's edges with a few
index probes instead of scanning every edge (0.55 s per run at a million edges).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("graphadmin", "0004_node_hnsw_m24")]

    operations = [
        migrations.AddIndex(model_name="edge", index=models.Index(fields=["graph", "id"], name="edge_graph_id")),
        migrations.AlterField(
            model_name="edge",
            name="graph",
            field=models.ForeignKey(
                db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name="edges", to="graphadmin.graph"
            ),
        ),
    ]
