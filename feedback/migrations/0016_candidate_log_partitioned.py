"""The candidate log (InjectionCandidate) becomes a table partitioned by month of created_at.

Why: it grows by every candidate of every context call. Retention (feedback.retention,
CANDIDATE_LOG_RETENTION_DAYS) expires it by dropping whole monthly partitions, recorded in the audit
chain, as the weight history's (migration 0006). Each row now carries ``created_at``, its
injection's time (so a month holds whole injections); existing rows take it from their injection.
Rows outside every monthly partition land in a DEFAULT partition, which retention never drops. The
uniqueness of a rank per injection includes created_at, as a partitioned table's unique keys must.
Its partitions are made and dropped by the owner's functions of migration 0013 (the application role
runs no DDL), which now accept this table too.
"""

import django.db.models.functions.datetime
from django.db import migrations, models

import graphadmin.clock

COLUMNS = "id, rank, selected, hops, tokens, total, features, components, edge_id, graph_id, injection_id, node_id"

# Migration 0013's name check, with the candidate log among the tables whose monthly partitions it makes.
PARTITION_NAME = """
CREATE OR REPLACE FUNCTION feedback_history_partition_name(parent text, month date) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = public, pg_temp AS $$
BEGIN
    IF parent NOT IN ('feedback_weightchange', 'feedback_weightchangeblock', 'feedback_injectioncandidate') THEN
        RAISE EXCEPTION 'not a partitioned log: %', parent USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF month IS NULL OR month <> date_trunc('month', month)::date THEN
        RAISE EXCEPTION 'a log partition starts on the first of a month, not %', month
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN parent || '_' || to_char(month, 'YYYY_MM');
END;
$$;
"""

CREATE = """
ALTER TABLE feedback_injectioncandidate RENAME TO feedback_injectioncandidate_unpartitioned;
ALTER TABLE feedback_injectioncandidate_unpartitioned DROP CONSTRAINT candidate_rank_per_injection;
DROP INDEX candidate_graph_node, feedback_injectioncandidate_edge_id_61a096f2,
    feedback_injectioncandidate_graph_id_d767620f, feedback_injectioncandidate_injection_id_8b5a38f5,
    feedback_injectioncandidate_node_id_10d2f26e;
CREATE SEQUENCE feedback_injectioncandidate_ids AS bigint;
SELECT setval('feedback_injectioncandidate_ids',
              coalesce((SELECT max(id) FROM feedback_injectioncandidate_unpartitioned), 0) + 1, false);
CREATE TABLE feedback_injectioncandidate (
    id bigint NOT NULL DEFAULT nextval('feedback_injectioncandidate_ids'),
    rank integer NOT NULL CHECK (rank >= 0),
    selected boolean NOT NULL,
    hops smallint NOT NULL CHECK (hops >= 0),
    tokens integer NOT NULL CHECK (tokens >= 0),
    total double precision NOT NULL,
    features jsonb NOT NULL,
    components jsonb NOT NULL,
    edge_id bigint NULL REFERENCES graphadmin_edge (id) DEFERRABLE INITIALLY DEFERRED,
    graph_id bigint NOT NULL REFERENCES graphadmin_graph (id) DEFERRABLE INITIALLY DEFERRED,
    injection_id bigint NOT NULL REFERENCES feedback_contextinjection (id) DEFERRABLE INITIALLY DEFERRED,
    node_id bigint NOT NULL REFERENCES graphadmin_node (id) DEFERRABLE INITIALLY DEFERRED,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT candidate_rank_per_injection UNIQUE (injection_id, rank, created_at),
    PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE feedback_injectioncandidate_ids OWNED BY feedback_injectioncandidate.id;
CREATE TABLE feedback_injectioncandidate_default PARTITION OF feedback_injectioncandidate DEFAULT;
CREATE INDEX candidate_graph_node ON feedback_injectioncandidate (graph_id, node_id);
CREATE INDEX feedback_injectioncandidate_edge_id_61a096f2 ON feedback_injectioncandidate (edge_id);
CREATE INDEX feedback_injectioncandidate_graph_id_d767620f ON feedback_injectioncandidate (graph_id);
CREATE INDEX feedback_injectioncandidate_injection_id_8b5a38f5 ON feedback_injectioncandidate (injection_id);
CREATE INDEX feedback_injectioncandidate_node_id_10d2f26e ON feedback_injectioncandidate (node_id);
"""


def partition_and_copy(apps, schema_editor):
    from feedback.retention import ensure_partitions

    with schema_editor.connection.cursor() as cur:
        cur.execute(PARTITION_NAME)
        cur.execute(CREATE)
        cur.execute("SELECT min(created_at) FROM feedback_contextinjection")
        (oldest,) = cur.fetchone()
    ensure_partitions(since=oldest, connection=schema_editor.connection, parents=["feedback_injectioncandidate"])
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            f"INSERT INTO feedback_injectioncandidate ({COLUMNS}, created_at) "
            f"SELECT {', '.join('c.' + c.strip() for c in COLUMNS.split(','))}, j.created_at "
            "FROM feedback_injectioncandidate_unpartitioned c "
            "JOIN feedback_contextinjection j ON j.id = c.injection_id"
        )
        cur.execute("DROP TABLE feedback_injectioncandidate_unpartitioned")


class Migration(migrations.Migration):
    atomic = True
    dependencies = [("feedback", "0015_vault_import_progress")]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(partition_and_copy, migrations.RunPython.noop)],
            state_operations=[
                migrations.AddField(
                    model_name="injectioncandidate",
                    name="created_at",
                    field=models.DateTimeField(
                        db_default=django.db.models.functions.datetime.Now(),
                        default=graphadmin.clock.now,
                        editable=False,
                        help_text="Its injection's time: the candidate log is partitioned by month of it.",
                    ),
                ),
                migrations.RemoveConstraint(model_name="injectioncandidate", name="candidate_rank_per_injection"),
                migrations.AddConstraint(
                    model_name="injectioncandidate",
                    constraint=models.UniqueConstraint(
                        fields=("injection", "rank", "created_at"), name="candidate_rank_per_injection"
                    ),
                ),
            ],
        ),
    ]
