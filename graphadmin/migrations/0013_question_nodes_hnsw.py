import pgvector.django.indexes
from django.db import migrations, models


class Migration(migrations.Migration):
    """A partial HNSW index over question nodes (kind 'question'): question-conditional evidence finds
    the similar past questions through it, never by a scan."""

    dependencies = [
        ("graphadmin", "0012_task_outbox"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="node",
            index=pgvector.django.indexes.HnswIndex(
                condition=models.Q(("kind", "question")),
                ef_construction=64,
                fields=["embedding"],
                m=16,
                name="node_question_hnsw",
                opclasses=["vector_cosine_ops"],
            ),
        ),
    ]
