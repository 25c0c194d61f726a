from django.conf import settings
from django.db import migrations, models

HELP = (
    "How far a link's learned weight moves its carry, for every question (times coef_weight, around neutral); 0: "
    "what agents taught a link stays with the questions that taught it (their own evidence). [0.0..1.0]"
)


class Migration(migrations.Migration):
    """The policy's ``learned_carry`` (docs/decisions/0014-learned-link-weight-stays-out-of-the-carry.md). A revision
    is never edited, so the revisions written before it keep what the code did when they were written (0.2, the
    constant ``ranking.scoring.WEIGHT_CARRY`` it replaces); a revision written from now on starts at 0."""

    dependencies = [
        ("graphadmin", "0020_expansion_covering_indexes"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="policyrevision",
            name="learned_carry",
            field=models.FloatField(default=0.2, help_text=HELP),
        ),
        migrations.AlterField(
            model_name="policyrevision",
            name="learned_carry",
            field=models.FloatField(default=0.0, help_text=HELP),
        ),
        migrations.AddConstraint(
            model_name="policyrevision",
            constraint=models.CheckConstraint(
                condition=models.Q(("learned_carry__gte", 0.0), ("learned_carry__lte", 1.0)),
                name="policy_learned_carry_range",
            ),
        ),
    ]
