"""Priority sets versioned with the policy: each revision records the edge-type priorities it was written
with. An existing graph's current revision gets today's priorities (they are what it runs with); older
revisions keep none (what they ran with was not recorded) and restore their numbers only."""

from django.db import migrations, models


def record_current(apps, schema_editor):
    PolicyRevision = apps.get_model("graphadmin", "PolicyRevision")
    EdgeType = apps.get_model("graphadmin", "EdgeType")
    newest = {}
    for rev in PolicyRevision.objects.order_by("graph_id", "-revision").only("pk", "graph_id", "revision"):
        newest.setdefault(rev.graph_id, rev.pk)
    for graph_id, pk in newest.items():
        rows = EdgeType.objects.filter(graph_id=graph_id).order_by("pk").values_list("pk", "priority")
        PolicyRevision.objects.filter(pk=pk).update(priorities={str(t): p for t, p in rows})


class Migration(migrations.Migration):
    dependencies = [
        ("graphadmin", "0014_lexical_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="policyrevision",
            name="priorities",
            field=models.JSONField(
                blank=True,
                help_text="The graph's edge-type priorities when this revision was written: edge type id -> "
                "priority. Empty (null) for revisions written before priority sets were recorded.",
                null=True,
            ),
        ),
        migrations.RunPython(record_current, migrations.RunPython.noop),
    ]
