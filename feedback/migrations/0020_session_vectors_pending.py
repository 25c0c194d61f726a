from django.db import migrations, models


class Migration(migrations.Migration):
    """A session remembers whether a question of it was answered while the graph's vectors were still being
    written (graphadmin.readiness): reports on it teach nothing (docs/feedback.md, "A graph that is not
    ready"). A constant default: PostgreSQL adds the column without rewriting the table."""

    dependencies = [
        ("feedback", "0019_candidate_log_parent_guards"),
    ]

    operations = [
        migrations.AddField(
            model_name="agentsession",
            name="vectors_pending",
            field=models.IntegerField(
                db_default=0,
                default=0,
                help_text="The most vectors the graph's embeddings task still had to write when a question of this session was answered (0: no answer came from a graph being built). Reports on a session above 0 teach nothing.",
            ),
        ),
    ]
