"""Job vectors (seed 000): ``job_{id}`` (or the digest form) with ``{kind, userId}`` in the
owner's namespace, written by the JobManager's writes, found only by their owner."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.jobs.models import Job
from apps.packages.services import search
from apps.packages.services.vector_kinds import KINDS, nearest_owned
from kody.capabilities import Context
from kody.embeddings import embed
from kody.lanes import run_lane
from kody.vectors.ids import vector_id
from kody.vectors.models import VectorEntry
from tests.jobs.factories import JobFactory
from tests.jobs.test_isolation import USAGE, rest

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

BACKUP = {
    "name": "Back up the photo library",
    "target": USAGE,
    "schedule": {"type": "cron", "expression": "0 2 * * *"},
}


def job_vectors(user) -> dict[str, VectorEntry]:
    rows = VectorEntry.objects.filter(namespace=user.stable_user_id, metadata__kind="job")
    return {v.vector_id: v for v in rows}


def found(user, query: str) -> list[dict]:
    hits = search.search(Context(user=user), query, limit=20, domain="jobs")
    return [h for h in hits if h["type"] == "job"]


def test_scheduling_a_job_writes_its_vector_and_search_finds_it(owner, owner_key):
    status, job = rest(owner_key, "jobSchedule", BACKUP)
    assert status == 200
    [vector] = job_vectors(owner).values()
    assert vector.vector_id == f"job_{job['id']}"
    assert vector.owner_user_id == owner.stable_user_id
    assert vector.metadata == {"kind": "job", "userId": owner.stable_user_id}
    hits = found(owner, "photo library backup")
    assert hits[0]["id"] == job["id"] and hits[0]["name"] == BACKUP["name"]


def test_renaming_rewrites_the_vector_and_deleting_removes_it(owner, owner_key):
    job = rest(owner_key, "jobSchedule", BACKUP)[1]
    before = job_vectors(owner)[f"job_{job['id']}"].embedding
    assert rest(owner_key, "jobUpdate", {"jobId": job["id"], "name": "Water the plants"})[0] == 200
    after = job_vectors(owner)[f"job_{job['id']}"].embedding
    assert list(after) != list(before)
    assert rest(owner_key, "jobDelete", {"jobId": job["id"]})[0] == 200
    assert job_vectors(owner) == {}


def test_an_outsider_never_finds_the_owners_job(owner, outsider, owner_key, outsider_key):
    job = rest(owner_key, "jobSchedule", BACKUP)[1]
    assert found(outsider, "photo library backup") == []
    assert rest(outsider_key, "search", {"query": "photo library backup"})[0] == 200
    body = rest(outsider_key, "search", {"query": "Back up the photo library"})[1]
    assert job["id"] not in str(body)
    # A crafted query in the outsider's scope with the owner's exact text finds nothing.
    [vector] = embed(["Back up the photo library"])
    assert nearest_owned(KINDS["job"], outsider.stable_user_id, vector, limit=10, min_score=0) == []
    # The outsider's job update, refused, leaves the owner's vector alone.
    rest(outsider_key, "jobDelete", {"jobId": job["id"]})
    assert set(job_vectors(owner)) == {f"job_{job['id']}"}


def test_package_job_ids_use_the_digest_form_and_reindex_sweeps_them(owner, outsider):
    long_id = "package-job:" + "p" * 40 + ":nightly-sync"
    JobFactory(id=long_id, user_id=owner.stable_user_id, name="Sync the calendar")
    JobFactory(id="job-short", user_id=outsider.stable_user_id)
    out = io.StringIO()
    call_command("reindex", "--kind", "job", stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("reindex scanned=2 embedded=2 skipped=0 deleted_orphans=0")
    digest = vector_id("job", long_id)
    assert digest.startswith("job_sha256:") and len(digest.encode()) <= 64
    assert set(job_vectors(owner)) == {digest}
    assert set(job_vectors(outsider)) == {"job_job-short"}

    Job.objects.filter(id=long_id).delete()  # a raw delete no writer saw
    out = io.StringIO()
    call_command("reindex", "--kind", "job", stdout=out, stderr=io.StringIO())
    assert out.getvalue().startswith("reindex scanned=1 embedded=0 skipped=1 deleted_orphans=1")
    assert job_vectors(owner) == {} and set(job_vectors(outsider)) == {"job_job-short"}


def test_retention_removes_the_vectors_of_the_jobs_it_prunes(owner):
    old = timezone.now() - timedelta(days=100)
    job = JobFactory(
        user_id=owner.stable_user_id,
        source_id="",
        enabled=False,
        schedule_json={"type": "once", "runAt": old.isoformat()},
        last_run_at=old,
        last_run_status="success",
    )
    Job.objects.filter(id=job.id).update(updated_at=old)
    call_command("reindex", "--kind", "job", stdout=io.StringIO(), stderr=io.StringIO())
    assert set(job_vectors(owner)) == {f"job_{job.id}"}
    run_lane("job_retention")
    assert not Job.objects.filter(id=job.id).exists()
    assert job_vectors(owner) == {}
