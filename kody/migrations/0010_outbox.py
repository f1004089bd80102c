from django.db import migrations, models

import django.utils.timezone


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0009_user_schema_tombstone"),
    ]

    operations = [
        migrations.CreateModel(
            name="OutboxMessage",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("key", models.CharField(db_collation="C", max_length=255, unique=True)),
                ("task", models.CharField(max_length=200)),
                ("payload", models.JSONField(default=dict)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("available_at", models.DateTimeField(default=django.utils.timezone.now)),
                ("attempts", models.PositiveIntegerField(default=0)),
                ("last_error", models.TextField(blank=True, default="")),
            ],
            options={
                "db_table": "kody_outbox",
                "indexes": [
                    models.Index(fields=["available_at", "id"], name="kody_outbox_due_ix")
                ],
            },
        ),
    ]
