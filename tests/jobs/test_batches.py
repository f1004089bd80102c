"""One alarm's claims: charged together when they all fit, one by one when not; run as one
batch that renews leases a backed-up queue ate into, and never runs a claim whose lease is
over."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.forms.models import model_to_dict
from django.utils import timezone

from apps.entitlements import plans
from apps.entitlements.services import metering
from apps.jobs import services
from apps.jobs.actor import RunLog
from apps.jobs.actor.manager import LEASE, JobManager
from apps.jobs.models import Job
from apps.jobs.services import runner
from kody.capabilities import Context
from kody.outbox.core import CLAIM_LEASE
from kody.outbox.models import OutboxMessage

pytestmark = pytest.mark.django_db

USAGE = {"capability": "accountUsage", "args": {}}
DAILY = {"type": "interval", "everySeconds": 86400}


def due_jobs(owner: Any, n: int) -> list[str]:
    """``n`` daily jobs of the owner, all due at the same instant; the clock moved there."""
    first = services.schedule_job(Context(user=owner), name="b", target=USAGE, schedule=DAILY)
    template = Job.objects.get(id=first["id"])
    Job.objects.bulk_create(
        Job(**{**model_to_dict(template), "id": f"{first['id']}-{k}", "storage_id": f"job:{k}"})
        for k in range(n - 1)
    )
    JobManager.call(owner.stable_user_id, "sync")
    return [first["id"], *(f"{first['id']}-{k}" for k in range(n - 1))]


def job_runs(owner: Any) -> list[dict[str, Any]]:
    page = RunLog.call(owner.stable_user_id, "list_runs", {"surface": "job"}, None, 100)
    return page["runs"]


def today() -> str:
    return timezone.now().date().isoformat()


def test_an_alarms_claims_are_charged_together_and_run_as_one_batch(owner, clock, monkeypatch):
    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "scheduled_jobs", 50)
    monkeypatch.setattr(runner, "send_runs", lambda user_id, claims: None)
    ids = due_jobs(owner, 5)
    clock.move_to(Job.objects.get(id=ids[0]).next_run_at)
    runner.wake_due_alarms()
    assert metering.read_daily(owner.stable_user_id, today())["job_runs_per_day"] == 5
    batch = OutboxMessage.objects.get().payload["claims"]
    assert sorted(c["job_id"] for c in batch) == sorted(ids)
    answers = runner.run_batch(owner.stable_user_id, batch)
    assert [a["applied"] for a in answers] == [True] * 5
    assert sorted(r["jobId"] for r in job_runs(owner)) == sorted(ids)


def test_claims_past_the_daily_limit_are_refused_one_by_one(owner, clock, wake, monkeypatch):
    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "scheduled_jobs", 50)
    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "job_runs_per_day", 3)
    ids = due_jobs(owner, 5)
    clock.move_to(Job.objects.get(id=ids[0]).next_run_at)
    wake()
    runs = job_runs(owner)
    assert sorted(r["status"] for r in runs) == ["error"] * 2 + ["success"] * 3
    assert {r["errorName"] for r in runs if r["status"] == "error"} == {"limit_reached"}
    assert metering.read_daily(owner.stable_user_id, today())["job_runs_per_day"] == 3
    assert not Job.objects.filter(claim_token__isnull=False).exists()


def claimed_undispatched(owner: Any, clock: Any, monkeypatch: Any) -> tuple[str, Any, dict]:
    """One due job claimed by its alarm, its dispatch left in the outbox (nothing runs it):
    the job id, when it was claimed, and the claim the batch would carry."""
    monkeypatch.setattr(runner, "send_runs", lambda user_id, claims: None)
    [job_id] = due_jobs(owner, 1)
    claimed_at = Job.objects.get(id=job_id).next_run_at
    clock.move_to(claimed_at)
    runner.wake_due_alarms()
    [claim] = OutboxMessage.objects.get().payload["claims"]
    return job_id, claimed_at, claim


def test_a_batch_late_off_the_queue_renews_its_leases_and_runs(owner, clock, monkeypatch):
    _, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    clock.move_to(claimed_at + LEASE - runner.MIN_LEASE_LEFT / 2)  # queued most of its lease
    [answer] = runner.run_batch(owner.stable_user_id, [claim])
    assert answer["applied"] is True
    [run] = job_runs(owner)
    assert run["status"] == "success"


def test_a_renewal_never_reaches_past_the_outbox_claim_lease(owner, clock, monkeypatch):
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    for step in range(1, 20):  # a batch that keeps renewing, as a very slow one would
        clock.move_to(claimed_at + step * (LEASE / 2))
        if not JobManager.call(owner.stable_user_id, "renew", claims=[claim]):
            break
    lease = Job.objects.get(id=job_id).lease_expires_at
    assert lease <= claimed_at + CLAIM_LEASE  # a repeated dispatch finds it over


def test_a_claim_whose_lease_is_over_is_neither_renewed_nor_run(owner, clock, monkeypatch):
    _, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    clock.move_to(claimed_at + LEASE + timedelta(seconds=1))
    assert JobManager.call(owner.stable_user_id, "renew", claims=[claim]) == {}
    assert runner.run_batch(owner.stable_user_id, [claim]) == []
    assert job_runs(owner) == []


def test_another_users_batch_cannot_renew_or_run_the_owners_claims(
    owner, outsider, clock, monkeypatch
):
    _, _, claim = claimed_undispatched(owner, clock, monkeypatch)
    assert JobManager.call(outsider.stable_user_id, "renew", claims=[claim]) == {}
    assert runner.run_batch(outsider.stable_user_id, [claim]) == []
    assert job_runs(owner) == [] and job_runs(outsider) == []
