from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("packages", "0002_database_foreign_keys")]

    operations = [
        migrations.AddField(
            model_name="secretentry",
            name="key_id",
            field=models.CharField(default="", max_length=32),
        ),
    ]
