from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0003_job_started_by")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="disabled_reason",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
    ]
