"""Node rows get fillfactor 50, like edges, so feedback_weight updates stay HOT.

A non-HOT update of a node row inserts a new entry into its HNSW embedding index, which costs far
more than the weight change itself; leaving free space on each page lets PostgreSQL update the row
in place (no indexed column changes). Applies to pages written from now on.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("feedback", "0003_batch_correction_dailymetric"), ("graphadmin", "0002_database_rules")]

    operations = [
        migrations.RunSQL(
            "ALTER TABLE graphadmin_node SET (fillfactor = 50);",
            "ALTER TABLE graphadmin_node RESET (fillfactor);",
        ),
    ]
