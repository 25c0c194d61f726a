"""WeightChange is append-only: a trigger refuses UPDATE and DELETE (the function is graphadmin's)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("feedback", "0001_initial"), ("graphadmin", "0002_database_rules")]

    operations = [
        migrations.RunSQL(
            """
            CREATE TRIGGER feedback_weightchange_append_only
                BEFORE UPDATE OR DELETE ON feedback_weightchange
                FOR EACH ROW EXECUTE FUNCTION graphadmin_append_only();
            """,
            "DROP TRIGGER feedback_weightchange_append_only ON feedback_weightchange;",
        ),
    ]
