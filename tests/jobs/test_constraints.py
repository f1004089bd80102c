"""Constraints of the jobs tables, enforced by Postgres."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs import models as jobs
from tests.constraints import refuses

pytestmark = pytest.mark.django_db

UID = "a" * 64


def _job(**extra) -> jobs.Job:
    fields = dict(
        user_id=UID,
        name="nightly",
        source_id="src",
        storage_id="job:1",
        schedule_json={"type": "cron", "expression": "0 3 * * *"},
        timezone="UTC",
        caller_context_json={},
        next_run_at=timezone.now(),
    )
    return jobs.Job.objects.create(**{**fields, **extra})


def test_job_ids_are_unique_and_retry_count_nonnegative():
    _job(id="job-1")
    refuses(lambda: _job(id="job-1"))
    refuses(lambda: _job(id="job-2", retry_count=-1))


def test_an_archived_artifact_per_job():
    row = dict(
        user_id=UID,
        source_id="s",
        published_commit="c",
        storage_id="job:1",
        retain_until=timezone.now() + timedelta(days=30),
    )
    jobs.ArchivedJobArtifact.objects.create(job_id="job-1", **row)
    refuses(lambda: jobs.ArchivedJobArtifact.objects.create(job_id="job-1", **row))


def test_worker_state_key_is_unique():
    jobs.JobsWorkerState.objects.create(key="watchdog_cooldown", value="{}")
    refuses(lambda: jobs.JobsWorkerState.objects.create(key="watchdog_cooldown", value="{}"))
