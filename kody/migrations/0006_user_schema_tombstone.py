from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0005_vectors_follow_the_embedder"),
    ]

    operations = [
        migrations.AddField(
            model_name="userschema",
            name="deleting_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
