"""The minute alarm wake (``jobs.wake_alarms``) as django-celery-beat's ``PeriodicTask`` row.

Without it, actor alarms wake only on the five-minute lane tick and a job every minute would
run every five. Idempotent like kody/0008: created only when missing, never overwritten.
"""

from django.db import migrations

TASK = "jobs.wake_alarms"
NAME = "jobs: wake due actor alarms (every minute)"


def create_wake(apps, schema_editor):
    crontabs = apps.get_model("django_celery_beat", "CrontabSchedule")
    tasks = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = crontabs.objects.get_or_create(
        minute="*",
        hour="*",
        day_of_week="*",
        day_of_month="*",
        month_of_year="*",
        timezone="UTC",
    )
    if tasks.objects.filter(task=TASK).exists():
        return
    tasks.objects.create(
        name=NAME,
        task=TASK,
        crontab=every_minute,
        queue="default",
        enabled=True,
        description="Casts due actor alarms each minute so scheduled jobs run on time; the "
        "actor_alarms lane (every five minutes) is the backstop.",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_wake, migrations.RunPython.noop)]
