from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0008_lane_dispatcher_periodic_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="userschema",
            name="deleting_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
