"""``jobs.started_by``: which delivery of a claim's batch started it (``JobManager.start``).

Nullable, no default: existing rows (claimed or not) read as not started, so a batch already
queued when this deploys starts its claims as usual.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0002_wake_alarms_periodic_task"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="started_by",
            field=models.CharField(blank=True, max_length=64, null=True),
        ),
    ]
