"""factory_boy factories for the jobs app's public tables: the schedule rows, archived
artifacts and the scheduler's key/value state. Runs, logs and storage live in the per-user
RunLog/JobManager actors; tests make those through the capabilities, never by hand."""

from __future__ import annotations

from datetime import timedelta

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.jobs import models as jobs
from tests.rows import ALICE

now = factory.LazyFunction(timezone.now)


class JobFactory(DjangoModelFactory):
    """An enabled hourly cron job of ALICE's, due now; ``user_id=owner.stable_user_id``."""

    class Meta:
        model = jobs.Job

    id = factory.Sequence(lambda n: f"job-{n}")
    user_id = ALICE
    name = "nightly"
    source_id = "src-1"
    storage_id = factory.LazyAttribute(lambda job: f"job:{job.id}")
    schedule_json = factory.LazyFunction(lambda: {"type": "cron", "expression": "0 * * * *"})
    timezone = "UTC"
    caller_context_json = factory.LazyFunction(dict)
    next_run_at = now


class ArchivedJobArtifactFactory(DjangoModelFactory):
    """What a deleted job leaves behind, kept for thirty days."""

    class Meta:
        model = jobs.ArchivedJobArtifact

    job_id = factory.Sequence(lambda n: f"job-{n}")
    user_id = ALICE
    source_id = "src-1"
    published_commit = "c1"
    storage_id = factory.LazyAttribute(lambda artifact: f"job:{artifact.job_id}")
    retain_until = factory.LazyFunction(lambda: timezone.now() + timedelta(days=30))


class JobsWorkerStateFactory(DjangoModelFactory):
    class Meta:
        model = jobs.JobsWorkerState

    key = "watchdog_cooldown"
    value = "{}"
