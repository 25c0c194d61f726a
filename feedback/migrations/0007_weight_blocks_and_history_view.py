"""Compact history for bulk batches (WeightChangeBlock) and one view over both history shapes.

A decay of a million edges wrote a million WeightChange rows (about 100 bytes and four index
entries each); it now writes one block per chunk: the chunk's edge ids, before and after values as
three aligned arrays. The arrays are stored uncompressed (STORAGE EXTERNAL): pglz finds little to
compress in doubles and cost more time than the rest of the write.

The block table is partitioned by month of created_at exactly like WeightChange, so retention drops
both ledgers' months together, and it carries the same append-only trigger.

``feedback_weighthistory`` is the one place readers (charts, batch pages, the API, rollback, metrics)
get history from: one row per change, whichever shape stored it.
"""

import django.contrib.postgres.fields
import django.db.models.deletion
from django.db import migrations, models

CREATE = """
CREATE SEQUENCE feedback_weightchangeblock_ids AS bigint;
CREATE TABLE feedback_weightchangeblock (
    id bigint NOT NULL DEFAULT nextval('feedback_weightchangeblock_ids'),
    batch_id bigint NOT NULL REFERENCES feedback_updatebatch (id) DEFERRABLE INITIALLY DEFERRED,
    graph_id bigint NOT NULL REFERENCES graphadmin_graph (id) DEFERRABLE INITIALLY DEFERRED,
    target varchar(4) NOT NULL,
    field varchar(20) NOT NULL,
    event varchar(50) NOT NULL,
    created_at timestamptz NOT NULL,
    id_min bigint NOT NULL,
    id_max bigint NOT NULL,
    size integer NOT NULL,
    ids bigint[] NOT NULL,
    before double precision[] NOT NULL,
    after double precision[] NOT NULL,
    CONSTRAINT weightblock_target_valid CHECK (target IN ('edge', 'node')),
    CONSTRAINT weightblock_field_valid CHECK (field IN ('weight', 'feedback_weight')),
    CONSTRAINT weightblock_aligned CHECK (
        size > 0 AND cardinality(ids) = size AND cardinality(before) = size AND cardinality(after) = size
        AND id_min <= id_max),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE feedback_weightchangeblock_ids OWNED BY feedback_weightchangeblock.id;
ALTER TABLE feedback_weightchangeblock ALTER ids SET STORAGE EXTERNAL, ALTER before SET STORAGE EXTERNAL,
    ALTER after SET STORAGE EXTERNAL;
CREATE TABLE feedback_weightchangeblock_default PARTITION OF feedback_weightchangeblock DEFAULT;
CREATE INDEX weightblock_batch ON feedback_weightchangeblock (batch_id);
CREATE INDEX weightblock_span ON feedback_weightchangeblock (graph_id, id_min, id_max);
CREATE INDEX weightblock_graph_time ON feedback_weightchangeblock (graph_id, created_at);
CREATE TRIGGER feedback_weightchangeblock_append_only
    BEFORE UPDATE OR DELETE ON feedback_weightchangeblock
    FOR EACH ROW EXECUTE FUNCTION graphadmin_append_only();

CREATE VIEW feedback_weighthistory AS
SELECT 'c' || w.id AS key, w.id AS change_id, NULL::bigint AS block_id, w.id AS seq,
       w.batch_id, w.graph_id, w.node_id, w.edge_id, w.field, w.before, w.after, w.event, w.use_event_id, w.created_at,
       coalesce(w.edge_id, w.node_id) AS span_min, coalesce(w.edge_id, w.node_id) AS span_max
FROM feedback_weightchange w
UNION ALL
SELECT 'b' || b.id || '.' || u.seq, NULL::bigint, b.id, u.seq,
       b.batch_id, b.graph_id, CASE WHEN b.target = 'node' THEN u.id END, CASE WHEN b.target = 'edge' THEN u.id END,
       b.field, u.before, u.after, b.event, NULL::bigint, b.created_at,
       b.id_min, b.id_max
FROM feedback_weightchangeblock b
CROSS JOIN LATERAL unnest(b.ids, b.before, b.after) WITH ORDINALITY AS u(id, before, after, seq);
"""

DROP = "DROP VIEW feedback_weighthistory; DROP TABLE feedback_weightchangeblock;"


def create(apps, schema_editor):
    from feedback.retention import ensure_partitions

    with schema_editor.connection.cursor() as cur:
        cur.execute(CREATE)
    ensure_partitions(connection=schema_editor.connection)


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0006_weightchange_partitioned"),
        ("graphadmin", "0004_node_hnsw_m24"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(create, lambda apps, schema_editor: schema_editor.execute(DROP))],
            state_operations=[
                migrations.CreateModel(
                    name="WeightChangeBlock",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("target", models.CharField(choices=[("edge", "edge"), ("node", "node")], max_length=4)),
                        (
                            "field",
                            models.CharField(
                                choices=[("weight", "weight"), ("feedback_weight", "feedback_weight")], max_length=20
                            ),
                        ),
                        ("event", models.CharField(blank=True, max_length=50)),
                        ("created_at", models.DateTimeField()),
                        ("id_min", models.BigIntegerField()),
                        ("id_max", models.BigIntegerField()),
                        ("size", models.PositiveIntegerField()),
                        (
                            "ids",
                            django.contrib.postgres.fields.ArrayField(base_field=models.BigIntegerField(), size=None),
                        ),
                        (
                            "before",
                            django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(), size=None),
                        ),
                        ("after", django.contrib.postgres.fields.ArrayField(base_field=models.FloatField(), size=None)),
                        (
                            "batch",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="blocks",
                                to="feedback.updatebatch",
                            ),
                        ),
                        (
                            "graph",
                            models.ForeignKey(
                                db_index=False,
                                on_delete=django.db.models.deletion.PROTECT,
                                related_name="+",
                                to="graphadmin.graph",
                            ),
                        ),
                    ],
                    options={
                        "indexes": [
                            models.Index(fields=["batch"], name="weightblock_batch"),
                            models.Index(fields=["graph", "id_min", "id_max"], name="weightblock_span"),
                            models.Index(fields=["graph", "created_at"], name="weightblock_graph_time"),
                        ],
                    },
                ),
                migrations.CreateModel(
                    name="WeightHistory",
                    fields=[
                        ("key", models.TextField(primary_key=True, serialize=False)),
                        ("change_id", models.BigIntegerField(null=True)),
                        ("block_id", models.BigIntegerField(null=True)),
                        ("seq", models.BigIntegerField()),
                        (
                            "batch",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="feedback.updatebatch",
                            ),
                        ),
                        (
                            "graph",
                            models.ForeignKey(
                                db_constraint=False,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="graphadmin.graph",
                            ),
                        ),
                        (
                            "node",
                            models.ForeignKey(
                                db_constraint=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="graphadmin.node",
                            ),
                        ),
                        (
                            "edge",
                            models.ForeignKey(
                                db_constraint=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="graphadmin.edge",
                            ),
                        ),
                        ("field", models.CharField(max_length=20)),
                        ("before", models.FloatField()),
                        ("after", models.FloatField()),
                        ("event", models.CharField(max_length=50)),
                        (
                            "use_event",
                            models.ForeignKey(
                                db_constraint=False,
                                null=True,
                                on_delete=django.db.models.deletion.DO_NOTHING,
                                related_name="+",
                                to="feedback.useevent",
                            ),
                        ),
                        ("created_at", models.DateTimeField()),
                        ("span_min", models.BigIntegerField()),
                        ("span_max", models.BigIntegerField()),
                    ],
                    options={
                        "verbose_name_plural": "weight history",
                        "db_table": "feedback_weighthistory",
                        "managed": False,
                    },
                ),
            ],
        ),
    ]
