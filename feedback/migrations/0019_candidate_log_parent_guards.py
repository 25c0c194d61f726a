"""The candidate log (InjectionCandidate) without foreign keys: its parents' deletes are guarded instead.

Why: every context call writes about a hundred candidate rows, and each row's four deferred foreign-key
checks (graph, injection, node, edge) ran at commit: four index lookups and a FOR KEY SHARE row lock
per row (docs/history/performance-agent-session.md, "Issue 27: the database side"). The rows' parents need no
check when a row is written: the graph and the injection are the rows the same transaction wrote just before
(ranking.context), the node and the edge the ones the retrieval read in it.

What stays: the half of the constraints that guards the log against a parent's delete. A constraint
trigger on each parent table (graph, injection, node, edge), deferred to the commit as the foreign keys
were, refuses a delete that leaves candidate rows naming a missing row, with the foreign-key error
(SQLSTATE 23503: Django's IntegrityError). The ORM's own rules are unchanged (the model keeps its
relations with ``db_constraint=False``: CASCADE from the graph and the injection, PROTECT from the node
and the edge). What is given up: the database no longer refuses a candidate row naming a row that
does not exist when it is written (only ranking.queries.copy_candidates writes the log), nor a row
written while another transaction deletes its node (the product archives nodes and edges; only a
graph's delete removes them, and the injection's own foreign key to the graph is kept).
"""

from django.db import migrations, models
from django.db.models import deletion

# The log's column naming each parent table, and the guard's trigger on it.
PARENTS = {
    "graphadmin_graph": "graph_id",
    "feedback_contextinjection": "injection_id",
    "graphadmin_node": "node_id",
    "graphadmin_edge": "edge_id",
}

GUARD_FUNCTION = """
CREATE FUNCTION feedback_candidate_log_parent_guard() RETURNS trigger
LANGUAGE plpgsql SET search_path = public, pg_temp AS $$
DECLARE
    named boolean;
BEGIN
    IF TG_ARGV[0] = 'graph_id' THEN
        named := EXISTS (SELECT 1 FROM feedback_injectioncandidate WHERE graph_id = OLD.id);
    ELSIF TG_ARGV[0] = 'injection_id' THEN
        named := EXISTS (SELECT 1 FROM feedback_injectioncandidate WHERE injection_id = OLD.id);
    ELSIF TG_ARGV[0] = 'node_id' THEN
        named := EXISTS (SELECT 1 FROM feedback_injectioncandidate WHERE node_id = OLD.id);
    ELSE
        named := EXISTS (SELECT 1 FROM feedback_injectioncandidate WHERE edge_id = OLD.id);
    END IF;
    IF named THEN
        RAISE EXCEPTION 'delete on table "%" leaves rows of the candidate log naming it', TG_TABLE_NAME
            USING ERRCODE = 'foreign_key_violation',
                  DETAIL = format('Key (id)=(%s) is still referenced from table "feedback_injectioncandidate" (%s).',
                                  OLD.id, TG_ARGV[0]);
    END IF;
    RETURN NULL;
END;
$$;
"""


def _forward():
    statements = [
        f"ALTER TABLE feedback_injectioncandidate DROP CONSTRAINT feedback_injectioncandidate_{column}_fkey"
        for column in PARENTS.values()
    ]
    statements.append(GUARD_FUNCTION)
    statements += [
        f"CREATE CONSTRAINT TRIGGER feedback_candidate_log_guard AFTER DELETE ON {table} "
        f"DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION feedback_candidate_log_parent_guard('{column}')"
        for table, column in PARENTS.items()
    ]
    return statements


def _backward():
    statements = [f"DROP TRIGGER feedback_candidate_log_guard ON {table}" for table in PARENTS]
    statements.append("DROP FUNCTION feedback_candidate_log_parent_guard()")
    statements += [
        f"ALTER TABLE feedback_injectioncandidate ADD CONSTRAINT feedback_injectioncandidate_{column}_fkey "
        f"FOREIGN KEY ({column}) REFERENCES {table} (id) DEFERRABLE INITIALLY DEFERRED"
        for table, column in PARENTS.items()
    ]
    return statements


def _field(to, on_delete, **kw):
    return models.ForeignKey(db_constraint=False, on_delete=on_delete, to=to, **kw)


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0018_partially_rolled_back"),
        ("graphadmin", "0015_policy_priorities"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(_forward(), _backward())],
            state_operations=[
                migrations.AlterField(
                    model_name="injectioncandidate",
                    name="injection",
                    field=_field("feedback.contextinjection", deletion.CASCADE, related_name="candidates"),
                ),
                migrations.AlterField(
                    model_name="injectioncandidate",
                    name="graph",
                    field=_field("graphadmin.graph", deletion.CASCADE, related_name="+"),
                ),
                migrations.AlterField(
                    model_name="injectioncandidate",
                    name="node",
                    field=_field("graphadmin.node", deletion.PROTECT, related_name="+"),
                ),
                migrations.AlterField(
                    model_name="injectioncandidate",
                    name="edge",
                    field=_field("graphadmin.edge", deletion.PROTECT, blank=True, null=True, related_name="+"),
                ),
            ],
        ),
    ]
