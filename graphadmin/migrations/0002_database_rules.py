"""Rules the database itself enforces, beyond what Django's constraints express.

- Edges reference their source, target and type *within the same graph* (composite foreign keys
  on (id, graph_id)), so no code path can link across graphs.
- The edge table uses fillfactor 50, so set-based weight updates stay on the same page (HOT).
- Append-only tables: a trigger refuses UPDATE and DELETE (used here and by feedback's ledger).
"""

from django.db import migrations

FORBID_FUNCTION = """
CREATE OR REPLACE FUNCTION graphadmin_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'append-only table %: % is not allowed', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$ LANGUAGE plpgsql;
"""

SAME_GRAPH_FKS = """
ALTER TABLE graphadmin_edge
    ADD CONSTRAINT edge_source_same_graph FOREIGN KEY (source_id, graph_id)
        REFERENCES graphadmin_node (id, graph_id),
    ADD CONSTRAINT edge_target_same_graph FOREIGN KEY (target_id, graph_id)
        REFERENCES graphadmin_node (id, graph_id),
    ADD CONSTRAINT edge_type_same_graph FOREIGN KEY (edge_type_id, graph_id)
        REFERENCES graphadmin_edgetype (id, graph_id);
ALTER TABLE graphadmin_edge SET (fillfactor = 50);
"""

REVERSE_FKS = """
ALTER TABLE graphadmin_edge
    DROP CONSTRAINT edge_source_same_graph,
    DROP CONSTRAINT edge_target_same_graph,
    DROP CONSTRAINT edge_type_same_graph;
ALTER TABLE graphadmin_edge RESET (fillfactor);
"""

AUDIT_APPEND_ONLY = """
CREATE TRIGGER graphadmin_auditevent_append_only
    BEFORE UPDATE OR DELETE ON graphadmin_auditevent
    FOR EACH ROW EXECUTE FUNCTION graphadmin_append_only();
"""


class Migration(migrations.Migration):
    dependencies = [("graphadmin", "0001_initial")]

    operations = [
        migrations.RunSQL(FORBID_FUNCTION, "DROP FUNCTION graphadmin_append_only() CASCADE;"),
        migrations.RunSQL(SAME_GRAPH_FKS, REVERSE_FKS),
        migrations.RunSQL(
            AUDIT_APPEND_ONLY, "DROP TRIGGER graphadmin_auditevent_append_only ON graphadmin_auditevent;"
        ),
    ]
