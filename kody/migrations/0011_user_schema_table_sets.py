import django.contrib.postgres.fields
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0010_outbox"),
    ]

    operations = [
        # NULL for every existing row: schemas made before lazy tables hold every table.
        migrations.AddField(
            model_name="userschema",
            name="table_sets",
            field=django.contrib.postgres.fields.ArrayField(
                base_field=models.CharField(max_length=200), blank=True, null=True, size=None
            ),
        ),
    ]
