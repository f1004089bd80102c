from django.db import migrations


class Migration(migrations.Migration):
    initial = True
    dependencies: list = []

    operations = [
        migrations.RunSQL(
            "CREATE EXTENSION IF NOT EXISTS vector;",
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
