"""The five-minute lane dispatcher as django-celery-beat's ``PeriodicTask`` row.

Idempotent: the schedule and the task are looked up by their natural keys and created only
when missing, so a second run (or a re-migrate after rolling back) changes nothing — not even
an operator's edits to the row. Rolling back leaves the row in place for the same reason.
"""

from django.db import migrations

DISPATCHER = "kody.lanes.dispatch"
NAME = "kody lanes: dispatcher (every five minutes)"


def create_dispatcher(apps, schema_editor):
    crontabs = apps.get_model("django_celery_beat", "CrontabSchedule")
    tasks = apps.get_model("django_celery_beat", "PeriodicTask")
    every_five, _ = crontabs.objects.get_or_create(
        minute="*/5",
        hour="*",
        day_of_week="*",
        day_of_month="*",
        month_of_year="*",
        timezone="UTC",
    )
    if tasks.objects.filter(task=DISPATCHER).exists():
        return
    tasks.objects.create(
        name=NAME,
        task=DISPATCHER,
        crontab=every_five,
        queue="default",
        enabled=True,
        description="Enqueues each due lane on the default queue. Pause single lanes under "
        "Kody platform kernel › Lanes instead of disabling this.",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("kody", "0007_lane_controls"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_dispatcher, migrations.RunPython.noop)]
