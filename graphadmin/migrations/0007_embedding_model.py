"""Every stored vector records the model that made it; no stored vector is all zero.

Vectors stored before this migration were made by whichever embedder was configured then (the
hashing embedder by default): they are marked LEGACY_MODEL, so retrieval refuses to compare them
with another model's query (409) until ``manage.py reembed --graph SLUG`` re-embeds the graph.
Zero vectors (text with no word the hashing embedder knew) become NULL: their cosine similarity
was NaN.
"""

import django.db.models.lookups
from django.db import migrations, models

LEGACY_MODEL = "unknown (before migration 0007)"

FORWARD = [
    ("UPDATE graphadmin_node SET embedding = NULL WHERE embedding IS NOT NULL AND vector_norm(embedding) = 0", None),
    (
        "UPDATE graphadmin_edge SET triplet_embedding = NULL WHERE triplet_embedding IS NOT NULL AND vector_norm(triplet_embedding) = 0",
        None,
    ),
    ("UPDATE graphadmin_node SET embedding_model = %s WHERE embedding IS NOT NULL", [LEGACY_MODEL]),
    ("UPDATE graphadmin_edge SET embedding_model = %s WHERE triplet_embedding IS NOT NULL", [LEGACY_MODEL]),
]


class Migration(migrations.Migration):
    dependencies = [
        ("graphadmin", "0006_policy_retrieval_numbers"),
    ]

    operations = [
        migrations.AddField(
            model_name="edge",
            name="embedding_model",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="The model that made the triplet embedding ('' when there is none, or a caller sent it unnamed).",
                max_length=200,
            ),
        ),
        migrations.AddField(
            model_name="node",
            name="embedding_model",
            field=models.CharField(
                blank=True,
                db_default="",
                default="",
                help_text="The model that made the embedding ('' when there is none, or a caller sent it without naming its model).",
                max_length=200,
            ),
        ),
        migrations.RunSQL([(q, p) if p else q for q, p in FORWARD], migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name="edge",
            index=models.Index(fields=["graph", "embedding_model"], name="edge_graph_embedding_model"),
        ),
        migrations.AddIndex(
            model_name="node",
            index=models.Index(fields=["graph", "embedding_model"], name="node_graph_embedding_model"),
        ),
        migrations.AddConstraint(
            model_name="edge",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("triplet_embedding__isnull", True),
                    django.db.models.lookups.GreaterThan(
                        models.Func(
                            models.F("triplet_embedding"), function="vector_norm", output_field=models.FloatField()
                        ),
                        0.0,
                    ),
                    _connector="OR",
                ),
                name="edge_triplet_embedding_not_zero",
            ),
        ),
        migrations.AddConstraint(
            model_name="node",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("embedding__isnull", True),
                    django.db.models.lookups.GreaterThan(
                        models.Func(models.F("embedding"), function="vector_norm", output_field=models.FloatField()),
                        0.0,
                    ),
                    _connector="OR",
                ),
                name="node_embedding_not_zero",
            ),
        ),
    ]
