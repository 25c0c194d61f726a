"""TRUNCATE refusals on the weight history (both ledgers and every partition of them).

The append-only row triggers do not fire on TRUNCATE. A statement-level BEFORE TRUNCATE trigger
(graphadmin's ``graphadmin_refuse_truncate``) goes on each partitioned parent and on every existing
partition, since a partition can be truncated by name; ``feedback.retention.ensure_partitions`` adds
it to each partition it creates. Retention still expires whole months by DETACH and DROP, audited.
"""

from django.db import migrations

from feedback.retention import LEDGERS, refuse_truncate_sql


def add(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        for parent in LEDGERS:
            cur.execute(
                "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
                "JOIN pg_class p ON p.oid = i.inhparent WHERE p.relname = %s",
                [parent],
            )
            for table in [parent, *(row[0] for row in cur.fetchall())]:
                cur.execute(refuse_truncate_sql(table))


def remove(apps, schema_editor):
    with schema_editor.connection.cursor() as cur:
        cur.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
            "WHERE t.tgname = 'feedback_history_refuse_truncate'"
        )
        for (table,) in cur.fetchall():
            cur.execute(f'DROP TRIGGER feedback_history_refuse_truncate ON "{table}"')


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0010_times_from_clock"),
        ("graphadmin", "0009_audit_truncate_refusal_checkpoint_forward_only"),
    ]

    operations = [migrations.RunPython(add, remove)]
