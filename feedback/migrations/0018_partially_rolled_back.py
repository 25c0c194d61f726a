"""Batch status ``partially_rolled_back``: a batch whose rollback left conflicts alone (not forced) keeps part
of its changes. Existing rows are marked from their rollback batch: conflicts, not forced, not a link batch
(whose conflicts are edges already in the wanted state)."""

from django.db import migrations, models

STATUSES = ("applied", "rolled_back", "partially_rolled_back")


def mark_partial(apps, schema_editor):
    UpdateBatch = apps.get_model("feedback", "UpdateBatch")
    (
        UpdateBatch.objects.filter(status="rolled_back", rolled_back_by__conflicts__gt=0)
        .exclude(rolled_back_by__details__force=True)
        .exclude(rolled_back_by__details__rolled_back_kind__in=["link", "link_rollback"])
        .update(status="partially_rolled_back")
    )


def unmark_partial(apps, schema_editor):
    UpdateBatch = apps.get_model("feedback", "UpdateBatch")
    UpdateBatch.objects.filter(status="partially_rolled_back").update(status="rolled_back")


class Migration(migrations.Migration):
    dependencies = [
        ("feedback", "0017_memory_batches_record_changes"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="updatebatch", name="batch_status_valid"),
        migrations.AlterField(
            model_name="updatebatch",
            name="status",
            field=models.CharField(
                choices=[(s, s.replace("_", " ")) for s in STATUSES], default="applied", max_length=30
            ),
        ),
        migrations.AddConstraint(
            model_name="updatebatch",
            constraint=models.CheckConstraint(condition=models.Q(("status__in", STATUSES)), name="batch_status_valid"),
        ),
        migrations.RunPython(mark_partial, unmark_partial),
    ]
