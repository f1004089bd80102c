"""The JobManager: alarms, claims with leases, bounded alarms, retries, expiry, kill switch."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.forms.models import model_to_dict
from django.test import override_settings

from apps.entitlements.services import metering
from apps.jobs import services
from apps.jobs.actor import RunLog
from apps.jobs.actor.manager import LEASE, JobManager
from apps.jobs.models import KILL_SWITCH_KEY, Job, JobsWorkerState
from apps.jobs.services import runner
from kody.actors.alarms import cast_alarm, due_alarms
from kody.capabilities import Context
from kody.userschema.models import UserSchema
from tests.jobs.factories import JobsWorkerStateFactory

pytestmark = pytest.mark.django_db

USAGE = {"capability": "accountUsage", "args": {}}
EVERY_MINUTE = {"type": "cron", "expression": "* * * * *"}


def schedule(user, schedule=EVERY_MINUTE, target=USAGE, **extra):  # type: ignore[no-untyped-def]
    return services.schedule_job(
        Context(user=user), name="probe", target=target, schedule=schedule, **extra
    )


def job_runs(user, job_id: str) -> list[dict]:  # type: ignore[no-untyped-def]
    page = RunLog.call(user.stable_user_id, "list_runs", {"job_id": job_id}, None, 500)
    return [r for r in page["runs"] if r["surface"] == "job"]


def test_a_job_every_minute_runs_exactly_once_per_minute(owner, clock, wake):
    job = schedule(owner)
    first = Job.objects.get(id=job["id"]).next_run_at
    schema = UserSchema.objects.get(user_id=owner.stable_user_id)
    assert schema.alarm_at == first  # armed from the earliest next_run_at
    for minute in range(10):
        clock.move_to(first + timedelta(minutes=minute, seconds=5))
        wake()
        wake()  # a second beat in the same minute finds nothing due
    runs = job_runs(owner, job["id"])
    scheduled = sorted(r["metadata"]["scheduledFor"] for r in runs)
    assert len(runs) == 10 and len(set(scheduled)) == 10
    assert all(r["status"] == "success" for r in runs)
    row = Job.objects.get(id=job["id"])
    assert row.next_run_at == first + timedelta(minutes=10) and row.claim_token is None


def test_a_finished_run_leaves_no_alarm_at_its_old_lease(owner, clock, wake):
    """The claim arms the alarm at its lease's end (the run may die); the report re-arms
    exactly, so the user's alarm moves to the next run (or goes) with the claim instead of
    firing for nothing when the old lease would have run out (a drain of 500 users left 500
    such alarms, all due together at the next wake, ahead of the real ones)."""
    hourly = schedule(owner, schedule={"type": "cron", "expression": "0 * * * *"})
    due = Job.objects.get(id=hourly["id"]).next_run_at
    clock.move_to(due + timedelta(seconds=1))
    wake()
    assert len(job_runs(owner, hourly["id"])) == 1
    row = Job.objects.get(id=hourly["id"])
    assert row.claim_token is None and row.next_run_at == due + timedelta(hours=1)
    schema = UserSchema.objects.get(user_id=owner.stable_user_id)
    assert schema.alarm_at == row.next_run_at  # not the old lease's end, an hour earlier
    Job.objects.filter(id=hourly["id"]).delete()
    once = schedule(owner, schedule={"type": "once", "runAt": row.next_run_at.isoformat()})
    JobManager.call(owner.stable_user_id, "sync")
    clock.move_to(row.next_run_at + timedelta(seconds=1))
    wake()
    assert len(job_runs(owner, once["id"])) == 1
    assert UserSchema.objects.get(user_id=owner.stable_user_id).alarm_at is None


def test_every_capability_call_of_a_job_has_its_own_run_record(owner, clock, wake):
    job = schedule(owner)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    wake()
    page = RunLog.call(owner.stable_user_id, "list_runs", {"job_id": job["id"]}, None, 10)
    parent = next(r for r in page["runs"] if r["surface"] == "job")
    child = next(r for r in page["runs"] if r["surface"] == "execute")
    assert child["name"] == "accountUsage" and child["parentRunId"] == parent["id"]
    detail = RunLog.call(owner.stable_user_id, "get_run", parent["id"])
    assert detail["logs"][0]["message"] == "called accountUsage"


def test_a_killed_worker_is_retried_after_its_lease_and_never_runs_twice(
    owner, clock, wake, monkeypatch
):
    job = schedule(owner)
    start = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(start)
    with monkeypatch.context() as patch:  # the worker dies before running the job
        patch.setattr(runner, "send_runs", lambda user_id, claims: None)
        wake()
    claimed = Job.objects.get(id=job["id"])
    assert claimed.claim_token is not None
    clock.move_to(start + LEASE / 2)
    wake()  # still leased: nobody else may run it
    assert Job.objects.get(id=job["id"]).claim_token == claimed.claim_token
    assert job_runs(owner, job["id"]) == []
    minutes = int(LEASE.total_seconds() // 60) + 4
    for minute in range(1, minutes + 1):
        clock.move_to(start + LEASE + timedelta(minutes=minute))
        wake()
    runs = job_runs(owner, job["id"])
    scheduled = [r["metadata"]["scheduledFor"] for r in runs]
    assert len(scheduled) == len(set(scheduled))  # no occurrence ran twice
    assert min(scheduled) == start.isoformat()  # the lost occurrence ran on retry
    expected = {(start + timedelta(minutes=n)).isoformat() for n in range(len(scheduled))}
    assert set(scheduled) == expected  # and every minute since ran once, in order


def test_a_claim_committed_just_before_a_crash_runs_without_waiting_out_its_lease(
    owner, clock, wake
):
    """The process dies right after the alarm's COMMIT: no on-commit work runs and no relay is
    kicked. The dispatch committed with the claim, so the relay's next pass runs the job, at
    the same instant, not a lease later."""
    from apps.jobs.services.runner import wake_due_alarms
    from kody.outbox.models import OutboxMessage
    from tests.jobs.conftest import relay_outbox

    job = schedule(owner)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    wake_due_alarms()  # on-commit callbacks are never run: the crash
    claimed = Job.objects.get(id=job["id"])
    assert claimed.claim_token is not None and job_runs(owner, job["id"]) == []
    [message] = OutboxMessage.objects.all()
    assert message.task == "jobs.dispatch_runs"
    assert message.payload["claims"] == [{"job_id": job["id"], "claim_token": claimed.claim_token}]
    assert relay_outbox() == 1  # the outbox_relay lane's next tick
    assert [r["status"] for r in job_runs(owner, job["id"])] == ["success"]
    assert Job.objects.get(id=job["id"]).claim_token is None


def test_a_claim_rolled_back_leaves_no_dispatch(owner, clock, monkeypatch):
    from apps.jobs.actor.manager import JobManager
    from kody.outbox.models import OutboxMessage

    job = schedule(owner)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)

    def fail_after_claiming(self):  # type: ignore[no-untyped-def]
        self._dispatch(self._claim_due())
        raise RuntimeError("the alarm fails after claiming")

    monkeypatch.setattr(JobManager, "alarm", fail_after_claiming)
    runner.wake_due_alarms()
    assert Job.objects.get(id=job["id"]).claim_token is None  # the claim rolled back...
    assert not OutboxMessage.objects.exists()  # ...and its dispatch with it
    day = clock_now().date().isoformat()  # ...and its job_runs_per_day charge
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 0


def test_a_repeated_dispatch_arrives_after_the_run_lease_and_runs_nothing(owner, clock):
    """A sent dispatch is repeated only after the outbox's claim lease (its relay died before
    deleting it); by then the run's own lease is over and the claim is refused, so a repeat
    never runs a job beside the run it repeats."""
    from kody.outbox.core import CLAIM_LEASE
    from kody.outbox.models import OutboxMessage

    assert CLAIM_LEASE > LEASE
    job = schedule(owner)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    runner.wake_due_alarms()
    [claim] = OutboxMessage.objects.get().payload["claims"]
    clock.shift(CLAIM_LEASE)  # the first delivery's run is still going, or died
    assert runner.run_claimed(owner.stable_user_id, **claim) is None
    assert job_runs(owner, job["id"]) == []


def test_a_lost_report_is_not_run_again(owner, clock, wake, monkeypatch):
    from apps.jobs.actor.manager import JobManager

    job = schedule(owner)
    start = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(start)
    real_finish = JobManager.finish_many

    def finish_then_lose_reply(self, reports):  # type: ignore[no-untyped-def]
        for report in reports:
            job = Job.objects.get(id=report["job_id"])
            self._write_records(job.id, job, job.claimed_scheduled_for, report["outcome"])
        return []

    with monkeypatch.context() as patch:
        patch.setattr(JobManager, "finish_many", finish_then_lose_reply)
        wake()
    assert JobManager.finish_many is real_finish
    clock.move_to(start + LEASE + timedelta(seconds=1))
    wake()
    runs = job_runs(owner, job["id"])
    assert [r["metadata"]["scheduledFor"] for r in runs].count(start.isoformat()) == 1


@override_settings(KODY_MAX_DUE_JOBS_PER_ALARM=50)
def test_a_thousand_due_jobs_drain_in_bounded_alarms(owner, clock, wake, monkeypatch):
    from apps.entitlements import plans
    from apps.jobs.actor import manager

    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "scheduled_jobs", 2000)
    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "job_runs_per_day", 2000)  # claims charge
    per_alarm: list[int] = []

    def finish_at_once(user_id, claims):  # type: ignore[no-untyped-def]
        # The default worker's part, minus the capability call (runs are tested above):
        # every claim reports a success through the real finish path.
        per_alarm.append(len(claims))
        now = clock_now().isoformat()
        outcome = {"status": "success", "started_at": now, "finished_at": now}
        for claim in claims:
            manager.JobManager.call(user_id, "finish", outcome=outcome, **claim)

    monkeypatch.setattr(runner, "send_runs", finish_at_once)
    daily = {"type": "interval", "everySeconds": 86400}
    template = Job.objects.get(id=schedule(owner, schedule=daily)["id"])
    start = template.next_run_at
    Job.objects.bulk_create(  # 999 more like it, all due at the same minute
        Job(**{**model_to_dict(template), "id": f"bulk-{n:04d}", "storage_id": f"job:{n}"})
        for n in range(999)
    )
    manager.JobManager.call(owner.stable_user_id, "sync")
    clock.move_to(start + timedelta(minutes=1))
    ticks = 0
    mine = Job.objects.filter(user_id=owner.stable_user_id)
    while mine.filter(last_run_at__isnull=True).exists():
        ticks += 1
        assert ticks <= 25, per_alarm
        clock.shift(timedelta(seconds=2))  # the near-immediate re-arm is due
        wake()
    assert per_alarm == [50] * 20  # bounded, and re-armed until the backlog was gone
    assert RunLog.call(owner.stable_user_id, "summary")["bySurface"]["job"]["success"] == 1000
    assert not mine.filter(claim_token__isnull=False).exists()


def test_an_expired_job_is_disabled_not_run_and_kept(owner, clock, wake):
    job = schedule(owner, expires_at=(clock_now() + timedelta(minutes=3)).isoformat())
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at + timedelta(minutes=5))
    wake()
    row = Job.objects.get(id=job["id"])
    assert row.enabled is False and job_runs(owner, job["id"]) == []


def clock_now():  # type: ignore[no-untyped-def]
    from django.utils import timezone

    return timezone.now()


def test_the_kill_switches_stop_runs(owner, clock, wake):
    job = schedule(owner)
    other = schedule(owner)
    Job.objects.filter(id=job["id"]).update(kill_switch_enabled=True)
    clock.move_to(Job.objects.get(id=other["id"]).next_run_at)
    JobsWorkerStateFactory(key=KILL_SWITCH_KEY, value="on")
    wake()
    assert job_runs(owner, other["id"]) == [] and job_runs(owner, job["id"]) == []
    JobsWorkerState.objects.filter(key=KILL_SWITCH_KEY).delete()
    clock.shift(timedelta(minutes=1))
    wake()
    # The minute missed while stopped and the current one, once each; the stopped job never.
    ran = [r["metadata"]["scheduledFor"] for r in job_runs(owner, other["id"])]
    assert len(ran) == len(set(ran)) == 2 and job_runs(owner, job["id"]) == []


def test_a_failing_target_retries_with_backoff_then_moves_on(owner, clock, wake, monkeypatch):
    from apps.jobs import targets
    from apps.jobs.actor.manager import MAX_RETRIES

    calls = []

    def broken(self, owner, grant):  # type: ignore[no-untyped-def]
        calls.append(1)
        raise ConnectionError("upstream down")

    monkeypatch.setattr(targets.CapabilityTarget, "run", broken)
    run_at = (clock_now() + timedelta(minutes=1)).isoformat()
    job = schedule(owner, schedule={"type": "once", "runAt": run_at})
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    for _ in range(12):
        wake()
        clock.shift(timedelta(minutes=5))
    assert len(calls) == MAX_RETRIES + 1  # the first try and the bounded retries
    row = Job.objects.get(id=job["id"])
    assert row.enabled is False and row.last_run_status == "error" and row.retry_count == 0
    assert [r["status"] for r in job_runs(owner, job["id"])] == ["error"] * (MAX_RETRIES + 1)


def test_job_runs_per_day_is_metered_and_enforced(owner, clock, wake, monkeypatch):
    from apps.entitlements import plans

    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "job_runs_per_day", 2)
    job = schedule(owner)
    start = Job.objects.get(id=job["id"]).next_run_at
    for minute in range(3):
        clock.move_to(start + timedelta(minutes=minute))
        wake()
    runs = sorted(job_runs(owner, job["id"]), key=lambda r: r["startedAt"])
    assert [r["status"] for r in runs] == ["success", "success", "error"]
    assert runs[-1]["errorName"] == "limit_reached"
    day = clock_now().date().isoformat()
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 2


def test_the_claim_charges_its_run_once_and_a_refused_claim_dispatches_nothing(
    owner, clock, eager_tasks, monkeypatch
):
    from apps.entitlements import plans
    from kody.outbox.models import OutboxMessage
    from tests.jobs.conftest import relay_outbox

    monkeypatch.setitem(plans.LIMITS[plans.Plan.FREE], "job_runs_per_day", 1)
    job = schedule(owner)
    start = Job.objects.get(id=job["id"]).next_run_at
    day = clock_now().date().isoformat()
    clock.move_to(start)
    runner.wake_due_alarms()
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 1  # claimed
    assert relay_outbox() == 1  # the run itself charges nothing more
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 1
    clock.move_to(start + timedelta(minutes=1))
    runner.wake_due_alarms()  # over the limit: recorded and advanced by the alarm itself
    assert not OutboxMessage.objects.exists()
    runs = sorted(job_runs(owner, job["id"]), key=lambda r: r["startedAt"])
    assert [(r["status"], r["errorName"]) for r in runs] == [
        ("success", None),
        ("error", "limit_reached"),
    ]
    row = Job.objects.get(id=job["id"])
    assert row.claim_token is None and row.last_run_status == "error"
    assert row.next_run_at == start + timedelta(minutes=2)
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 1


def test_the_job_runs_per_day_charge_is_invisible_to_another_user(owner, outsider, clock, wake):
    job = schedule(owner)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    wake()
    day = clock_now().date().isoformat()
    assert metering.read_daily(owner.stable_user_id, day)["job_runs_per_day"] == 1
    assert metering.read_daily(outsider.stable_user_id, day)["job_runs_per_day"] == 0


def test_a_lost_alarm_cast_is_found_by_the_watchdog(owner, clock, wake):
    from kody.lanes import run_lane

    job = schedule(owner)
    UserSchema.objects.filter(user_id=owner.stable_user_id).update(alarm_at=None)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at)
    wake()
    assert job_runs(owner, job["id"]) == []  # no alarm: nothing wakes the scheduler
    run_lane("job_schedule_watchdog")
    assert UserSchema.objects.get(user_id=owner.stable_user_id).alarm_at is not None
    clock.shift(timedelta(seconds=1))
    wake()
    assert len(job_runs(owner, job["id"])) == 1


def test_a_duplicate_alarm_cast_claims_nothing_twice(owner, clock, wake):
    job = schedule(owner)
    at = Job.objects.get(id=job["id"]).next_run_at
    clock.move_to(at)
    [due] = due_alarms(clock_now(), None, 10)
    wake()
    cast_alarm(due, clock_now())  # the same wake delivered again
    assert len(job_runs(owner, job["id"])) == 1


def test_run_now_twice_at_one_frozen_instant_runs_twice(owner, clock, wake):
    """Both "run now"s arm the alarm at the same instant; the second is a new arming, so the
    kernel wakes the scheduler again instead of answering from the first wake's record."""
    job = schedule(owner)
    for _ in range(2):
        services.run_now(owner.stable_user_id, job["id"])
        wake()
    assert len(job_runs(owner, job["id"])) == 2


def test_beat_wakes_alarms_every_minute():
    from django_celery_beat.models import PeriodicTask

    wake = PeriodicTask.objects.get(task="jobs.wake_alarms")
    assert wake.enabled and wake.crontab.minute == "*" and wake.crontab.hour == "*"


def test_every_minute_runs_once_across_a_beat_outage_and_a_redis_restart(
    owner, clock, wake, monkeypatch
):
    from apps.jobs.actor import manager
    from kody.actors import alarms

    job = schedule(owner)
    start = Job.objects.get(id=job["id"]).next_run_at
    for minute in range(14):
        clock.move_to(start + timedelta(minutes=minute, seconds=10))
        if minute in (3, 4, 5):
            continue  # beat is down: nothing wakes the scheduler
        if minute == 6:  # Redis restarts: the alarm casts and the queued run are lost
            with monkeypatch.context() as patch:
                patch.setattr(alarms, "cast_alarm", lambda *args: None)
                wake()
            manager.JobManager.call(owner.stable_user_id, "sync")  # a later write re-arms
            with monkeypatch.context() as patch:
                patch.setattr(runner, "send_runs", lambda user_id, claims: None)
                clock.shift(timedelta(seconds=1))
                wake()
            continue
        wake()
    scheduled = [r["metadata"]["scheduledFor"] for r in job_runs(owner, job["id"])]
    assert len(scheduled) == len(set(scheduled))  # no minute ran twice
    expected = {(start + timedelta(minutes=n)).isoformat() for n in range(14)}
    assert set(scheduled) == expected  # and every minute ran, late ones caught up in order
