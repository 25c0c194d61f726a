"""WeightChange becomes a table partitioned by month of created_at, with fewer indexes.

Why: the ledger grows without bound. Retention (feedback.retention) expires it by dropping whole
monthly partitions, recorded in the audit chain; no row-level DELETE path is opened (the
append-only trigger stays on every partition). Rows outside every monthly partition land in a
DEFAULT partition, which retention never drops.

The redundant single-column FK indexes are gone: every read uses the composite indexes, and each
index costs a write per history row (a decay writes one row per edge).

Existing rows are copied over; monthly partitions are created for the months they span, and for
this month and the next three.
"""

import django.db.models.deletion
from django.db import migrations, models

COLUMNS = "id, field, before, after, event, created_at, batch_id, edge_id, graph_id, node_id, use_event_id"

CREATE = """
ALTER TABLE feedback_weightchange RENAME TO feedback_weightchange_unpartitioned;
ALTER TABLE feedback_weightchange_unpartitioned DROP CONSTRAINT weightchange_one_target;
ALTER TABLE feedback_weightchange_unpartitioned DROP CONSTRAINT weightchange_field_valid;
DROP INDEX weightchange_batch, weightchange_edge_history, weightchange_node_history, weightchange_graph_time;
CREATE SEQUENCE feedback_weightchange_ids AS bigint;
SELECT setval('feedback_weightchange_ids', coalesce((SELECT max(id) FROM feedback_weightchange_unpartitioned), 0) + 1, false);
CREATE TABLE feedback_weightchange (
    id bigint NOT NULL DEFAULT nextval('feedback_weightchange_ids'),
    field varchar(20) NOT NULL,
    before double precision NOT NULL,
    after double precision NOT NULL,
    event varchar(50) NOT NULL,
    created_at timestamptz NOT NULL,
    batch_id bigint NOT NULL REFERENCES feedback_updatebatch (id) DEFERRABLE INITIALLY DEFERRED,
    edge_id bigint NULL REFERENCES graphadmin_edge (id) DEFERRABLE INITIALLY DEFERRED,
    graph_id bigint NOT NULL REFERENCES graphadmin_graph (id) DEFERRABLE INITIALLY DEFERRED,
    node_id bigint NULL REFERENCES graphadmin_node (id) DEFERRABLE INITIALLY DEFERRED,
    use_event_id bigint NULL REFERENCES feedback_useevent (id) DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT weightchange_one_target CHECK ((node_id IS NOT NULL AND edge_id IS NULL) OR (node_id IS NULL AND edge_id IS NOT NULL)),
    CONSTRAINT weightchange_field_valid CHECK (field IN ('weight', 'feedback_weight')),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE feedback_weightchange_ids OWNED BY feedback_weightchange.id;
CREATE TABLE feedback_weightchange_default PARTITION OF feedback_weightchange DEFAULT;
CREATE INDEX weightchange_batch ON feedback_weightchange (batch_id);
CREATE INDEX weightchange_edge_history ON feedback_weightchange (graph_id, edge_id, created_at) WHERE edge_id IS NOT NULL;
CREATE INDEX weightchange_node_history ON feedback_weightchange (graph_id, node_id, created_at) WHERE node_id IS NOT NULL;
CREATE INDEX weightchange_graph_time ON feedback_weightchange (graph_id, created_at);
CREATE TRIGGER feedback_weightchange_append_only
    BEFORE UPDATE OR DELETE ON feedback_weightchange
    FOR EACH ROW EXECUTE FUNCTION graphadmin_append_only();
"""


def partition_and_copy(apps, schema_editor):
    from feedback.retention import ensure_partitions

    with schema_editor.connection.cursor() as cur:
        cur.execute(CREATE)
        cur.execute("SELECT min(created_at), max(created_at) FROM feedback_weightchange_unpartitioned")
        oldest, _newest = cur.fetchone()
    ensure_partitions(since=oldest, connection=schema_editor.connection, parents=["feedback_weightchange"])
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO feedback_weightchange ({COLUMNS}) SELECT {COLUMNS} FROM feedback_weightchange_unpartitioned"
        )
        cur.execute("DROP TABLE feedback_weightchange_unpartitioned")


class Migration(migrations.Migration):
    atomic = True
    dependencies = [("feedback", "0005_weightchange_partial_history_indexes")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(partition_and_copy, migrations.RunPython.noop)],
            state_operations=[
                migrations.AlterField(
                    model_name="weightchange",
                    name="batch",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="changes",
                        to="feedback.updatebatch",
                    ),
                ),
                migrations.AlterField(
                    model_name="weightchange",
                    name="edge",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="graphadmin.edge",
                    ),
                ),
                migrations.AlterField(
                    model_name="weightchange",
                    name="graph",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="graphadmin.graph",
                    ),
                ),
                migrations.AlterField(
                    model_name="weightchange",
                    name="node",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="graphadmin.node",
                    ),
                ),
                migrations.AlterField(
                    model_name="weightchange",
                    name="use_event",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="+",
                        to="feedback.useevent",
                    ),
                ),
            ],
        ),
    ]
