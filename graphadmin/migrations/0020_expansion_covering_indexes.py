from django.db import migrations, models


class Migration(migrations.Migration):
    """Covering indexes for the expansion (ranking.queries.EXPAND_LEVELS): each end's degree is counted from
    the live links by source and by target with their type (index-only), and a link's far end is checked live
    (graph, archived, kind) from the node index instead of the node row. Measured on the 100k-node bench graph
    (docs/performance.md, issue 37 item 5): the degree count of one context call 166 -> 10 ms, the far-end
    checks about 7,000 x 0.02 -> x 0.004 ms. None holds a column a weight write changes, so those updates
    stay HOT."""

    dependencies = [
        ("graphadmin", "0019_policy_abstain_floor"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="edge",
            index=models.Index(
                condition=models.Q(("archived", False)),
                fields=["graph", "source"],
                include=["edge_type"],
                name="edge_live_source",
            ),
        ),
        migrations.AddIndex(
            model_name="edge",
            index=models.Index(
                condition=models.Q(("archived", False)),
                fields=["graph", "target"],
                include=["edge_type"],
                name="edge_live_target",
            ),
        ),
        migrations.AddIndex(
            model_name="node",
            index=models.Index(fields=["id"], include=["graph", "archived", "kind"], name="node_live_kind"),
        ),
    ]
