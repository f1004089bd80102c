"""Constraints of the jobs tables, enforced by Postgres."""

from __future__ import annotations

import pytest

from tests.constraints import refuses
from tests.jobs.factories import ArchivedJobArtifactFactory, JobFactory, JobsWorkerStateFactory

pytestmark = pytest.mark.django_db


def test_job_ids_are_unique_and_retry_count_nonnegative():
    JobFactory(id="job-1")
    refuses(lambda: JobFactory(id="job-1"))
    refuses(lambda: JobFactory(id="job-2", retry_count=-1))


def test_an_archived_artifact_per_job():
    ArchivedJobArtifactFactory(job_id="job-1")
    refuses(lambda: ArchivedJobArtifactFactory(job_id="job-1"))


def test_worker_state_key_is_unique():
    JobsWorkerStateFactory(key="watchdog_cooldown")
    refuses(lambda: JobsWorkerStateFactory(key="watchdog_cooldown"))
