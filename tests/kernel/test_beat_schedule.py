"""Beat reads its schedule from the database; the dispatcher row comes from a migration."""

from __future__ import annotations

import importlib

import pytest
from django.apps import apps as live_apps
from django.conf import settings
from django.core.management import call_command
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from kody.actors.topology import worker_commands

DATABASE_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
MIGRATION = importlib.import_module("kody.migrations.0008_lane_dispatcher_periodic_task")


def dispatcher() -> PeriodicTask:
    return PeriodicTask.objects.select_related("crontab").get(task="kody.lanes.dispatch")


@pytest.mark.django_db
def test_the_migration_schedules_the_dispatcher_every_five_minutes_in_utc():
    row = dispatcher()
    assert row.enabled and row.queue == "default" and row.interval is None
    cron = row.crontab
    assert (cron.minute, cron.hour, cron.day_of_week, cron.day_of_month, cron.month_of_year) == (
        "*/5",
        "*",
        "*",
        "*",
        "*",
    )
    assert str(cron.timezone) == "UTC"


@pytest.mark.django_db
def test_the_dispatcher_row_survives_a_re_migrate_with_the_operators_edits():
    row = dispatcher()
    PeriodicTask.objects.filter(pk=row.pk).update(description="checked by ops")
    crontabs = CrontabSchedule.objects.count()

    call_command("migrate", "kody", "0007_lane_controls", verbosity=0)
    assert PeriodicTask.objects.filter(pk=row.pk).exists()  # rolling back deletes nothing
    call_command("migrate", "kody", verbosity=0)

    again = dispatcher()  # .get(): still exactly one
    assert again.pk == row.pk and again.crontab_id == row.crontab_id
    assert again.description == "checked by ops"
    assert CrontabSchedule.objects.count() == crontabs


@pytest.mark.django_db
def test_running_the_data_migration_twice_changes_nothing():
    before = list(PeriodicTask.objects.values()), list(CrontabSchedule.objects.values())
    MIGRATION.create_dispatcher(live_apps, None)
    MIGRATION.create_dispatcher(live_apps, None)
    assert (list(PeriodicTask.objects.values()), list(CrontabSchedule.objects.values())) == before


@pytest.mark.django_db
def test_a_missing_dispatcher_is_recreated_by_the_migration():
    PeriodicTask.objects.filter(task="kody.lanes.dispatch").delete()
    MIGRATION.create_dispatcher(live_apps, None)
    assert dispatcher().crontab.minute == "*/5"


def test_beat_runs_the_database_scheduler():
    assert settings.CELERY_BEAT_SCHEDULER == DATABASE_SCHEDULER
    assert not getattr(settings, "CELERY_BEAT_SCHEDULE", None)  # no second, static schedule
    beat = next(argv for argv in worker_commands("/venv/bin/python") if "beat" in argv)
    assert beat[beat.index("-S") + 1] == DATABASE_SCHEDULER
    assert "-s" not in beat  # no schedule file under var/
