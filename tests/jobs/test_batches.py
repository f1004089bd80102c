"""One alarm's claims: charged together when they all fit, one by one when not; run as one
batch whose start (one JobManager call) lets one delivery of it run each claim, renews leases
a backed-up queue ate into, and runs a claim whose lease is over only while the alarm has not
claimed it again."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.forms.models import model_to_dict
from django.utils import timezone

from apps.entitlements import plans
from apps.entitlements.services import metering
from apps.jobs import services, targets
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


def start(owner: Any, claim: dict, delivery: str) -> dict[str, str]:
    return JobManager.call(owner.stable_user_id, "start", claims=[claim], delivery=delivery)


def test_a_renewal_never_reaches_past_the_outbox_claim_lease(owner, clock, monkeypatch):
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    for step in range(1, 20):  # a delivery that keeps renewing, as a very slow one would
        clock.move_to(claimed_at + step * (LEASE / 2))
        if not start(owner, claim, "slow-delivery"):
            break
    lease = Job.objects.get(id=job_id).lease_expires_at
    assert lease <= claimed_at + CLAIM_LEASE  # a repeated dispatch finds it over


def test_a_batch_that_waited_past_its_lease_runs_it_if_the_alarm_has_not(owner, clock, monkeypatch):
    """A backed-up queue outlived the lease; the alarm has not claimed the job again, so the
    claim is still the batch's: it starts, runs once and is charged once (no retry)."""
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    calls = counting_target(monkeypatch)
    clock.move_to(claimed_at + LEASE + timedelta(seconds=1))
    [answer] = runner.run_batch(owner.stable_user_id, [claim])
    assert answer["applied"] is True and len(calls) == 1
    job = Job.objects.get(id=job_id)
    assert job.claim_token is None and job.retry_count == 0
    assert metering.read_daily(owner.stable_user_id, today())["job_runs_per_day"] == 1
    runner.wake_due_alarms()  # nothing left to reclaim
    assert [r["status"] for r in job_runs(owner)] == ["success"] and len(calls) == 1


def test_a_batch_that_waited_past_its_lease_runs_nothing_once_the_alarm_reclaimed_it(
    owner, clock, monkeypatch
):
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    calls = counting_target(monkeypatch)
    clock.move_to(claimed_at + LEASE + timedelta(seconds=1))
    runner.wake_due_alarms()  # the alarm got there first: a retry with a new token
    assert Job.objects.get(id=job_id).claim_token != claim["claim_token"]
    assert runner.run_batch(owner.stable_user_id, [claim]) == []
    assert calls == [] and job_runs(owner) == []


def test_a_claim_over_beyond_what_a_renewal_can_reach_is_neither_started_nor_run(
    owner, clock, monkeypatch
):
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    clock.move_to(claimed_at + CLAIM_LEASE - runner.MIN_LEASE_LEFT / 2)
    assert start(owner, claim, "late-delivery") == {}
    assert Job.objects.get(id=job_id).started_by is None
    assert runner.run_batch(owner.stable_user_id, [claim]) == []
    assert job_runs(owner) == []


def test_another_users_batch_cannot_start_or_run_the_owners_claims(
    owner, outsider, clock, monkeypatch
):
    job_id, _, claim = claimed_undispatched(owner, clock, monkeypatch)
    assert start(outsider, claim, "outsiders-delivery") == {}
    assert runner.run_batch(outsider.stable_user_id, [claim]) == []
    assert Job.objects.get(id=job_id).started_by is None  # the owner's claim is untouched
    assert job_runs(owner) == [] and job_runs(outsider) == []
    [answer] = runner.run_batch(owner.stable_user_id, [claim])  # and still runs for the owner
    assert answer["applied"] is True


# --- two deliveries of one batch ---------------------------------------------------------------
#
# Celery delivers an ``acks_late`` message again when it was not acknowledged (a broker
# restart, a lost worker), possibly while the first delivery is still running its claims.
# ``accountUsage`` is a read-only target (not keyed in the invocation ledger): only the
# start's compare-and-set keeps a second delivery from calling it again.


def counting_target(monkeypatch: Any, during: Any = None) -> list[int]:
    """Count the target's calls (running ``during()`` inside the first, if given)."""
    calls: list[int] = []
    real = targets.CapabilityTarget.run

    def run(self, owner, grant):  # type: ignore[no-untyped-def]
        calls.append(1)
        if during is not None and len(calls) == 1:
            during()
        return real(self, owner, grant)

    monkeypatch.setattr(targets.CapabilityTarget, "run", run)
    return calls


def test_a_second_delivery_while_the_first_runs_runs_nothing(owner, clock, monkeypatch):
    _, _, claim = claimed_undispatched(owner, clock, monkeypatch)
    second: list[list[dict[str, Any]]] = []
    calls = counting_target(
        monkeypatch, lambda: second.append(runner.run_batch(owner.stable_user_id, [claim]))
    )
    [answer] = runner.run_batch(owner.stable_user_id, [claim])
    assert answer["applied"] is True
    assert second == [[]]  # the redelivery, arriving mid-run, ran and reported nothing
    assert len(calls) == 1
    assert [r["status"] for r in job_runs(owner)] == ["success"]


def test_a_second_delivery_after_a_lost_report_runs_nothing(owner, clock, monkeypatch):
    """The first delivery ran but its report has not landed (lost, or still to come): the
    claim is still its token's and inside its lease, and the second delivery skips it."""
    job_id, _, claim = claimed_undispatched(owner, clock, monkeypatch)
    calls = counting_target(monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(JobManager, "finish_many", lambda self, reports: [])
        assert runner.run_batch(owner.stable_user_id, [claim]) == []
    assert Job.objects.get(id=job_id).claim_token == claim["claim_token"]
    assert runner.run_batch(owner.stable_user_id, [claim]) == []
    assert len(calls) == 1


def test_a_started_claim_whose_delivery_died_is_claimed_again_and_runs(owner, clock, monkeypatch):
    """ "Started" belongs to a claim token: after the lease runs out the alarm claims the job
    again with a new token, which a new delivery starts and runs."""
    job_id, claimed_at, claim = claimed_undispatched(owner, clock, monkeypatch)
    assert job_id in start(owner, claim, "a-delivery-that-dies")  # ...and then nothing
    calls = counting_target(monkeypatch)
    clock.move_to(claimed_at + LEASE + timedelta(seconds=1))
    assert runner.run_batch(owner.stable_user_id, [claim]) == []  # the old claim is over
    runner.wake_due_alarms()  # the alarm armed at the lease's expiry
    retry = Job.objects.get(id=job_id)
    assert retry.claim_token != claim["claim_token"] and retry.retry_count == 1
    assert retry.started_by is None
    [message] = OutboxMessage.objects.filter(payload__claims__0__claim_token=retry.claim_token)
    [answer] = runner.run_batch(owner.stable_user_id, message.payload["claims"])
    assert answer["applied"] is True and len(calls) == 1
    assert [r["status"] for r in job_runs(owner)] == ["success"]


@pytest.mark.django_db(transaction=True)
def test_two_deliveries_at_once_run_a_read_only_target_once(owner, clock, monkeypatch):
    ids = due_jobs(owner, 3)
    monkeypatch.setattr(runner, "send_runs", lambda user_id, claims: None)
    clock.move_to(Job.objects.get(id=ids[0]).next_run_at)
    runner.wake_due_alarms()
    batch = OutboxMessage.objects.get().payload["claims"]
    both = threading.Barrier(2)
    calls = counting_target(monkeypatch)
    answers: list[list[dict[str, Any]]] = []
    failed: list[BaseException] = []

    def deliver() -> None:
        try:
            both.wait(30)
            answers.append(runner.run_batch(owner.stable_user_id, batch))
        except BaseException as exc:  # surfaced below
            failed.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failed == []
    assert sorted(len(a) for a in answers) == [0, 3]  # one delivery ran them all
    assert len(calls) == 3
    assert sorted(r["jobId"] for r in job_runs(owner)) == sorted(ids)


def test_a_slow_batch_starts_what_it_has_left_again_and_runs_it(owner, clock, monkeypatch):
    """One start per batch; a batch whose own first run took most of the lease starts the
    rest again (its own claims, so the call renews them) and runs them."""
    monkeypatch.setattr(runner, "send_runs", lambda user_id, claims: None)
    ids = due_jobs(owner, 2)
    clock.move_to(Job.objects.get(id=ids[0]).next_run_at)
    runner.wake_due_alarms()
    batch = OutboxMessage.objects.get().payload["claims"]
    starts: list[list[str]] = []
    real_call = JobManager.call

    def call(user_id, method, *args, **kwargs):  # type: ignore[no-untyped-def]
        if method == "start":
            starts.append([c["job_id"] for c in kwargs["claims"]])
        return real_call(user_id, method, *args, **kwargs)

    monkeypatch.setattr(JobManager, "call", call)
    counting_target(monkeypatch, lambda: clock.shift(LEASE - runner.MIN_LEASE_LEFT / 2))
    answers = runner.run_batch(owner.stable_user_id, batch)
    assert [a["applied"] for a in answers] == [True, True]
    assert starts == [[c["job_id"] for c in batch], [batch[1]["job_id"]]]
    assert sorted(r["jobId"] for r in job_runs(owner)) == sorted(ids)
