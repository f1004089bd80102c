import pgvector.django.vector
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("kody", "0004_lane_dispatch_claim")]

    operations = [
        # Vectors are derived: nothing wrote them before this release, and a dimension change
        # cannot cast old rows. `manage.py reindex` rebuilds them from their source rows.
        migrations.RunSQL("DELETE FROM kody_vectors", reverse_sql=migrations.RunSQL.noop),
        migrations.AddField(
            model_name="vectorentry",
            name="model",
            field=models.CharField(default="", max_length=128),
        ),
        migrations.AlterField(
            model_name="vectorentry",
            name="embedding",
            field=pgvector.django.vector.VectorField(dimensions=256),
        ),
    ]
