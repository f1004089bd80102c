"""Celery tasks of jobs (ids in, never model instances)."""

from __future__ import annotations

from celery import shared_task

from apps.jobs.services import runner


@shared_task(name="jobs.run_batch", queue="default", acks_late=True, ignore_result=True)
def run_batch(user_id: str, claims: list[dict[str, str]]) -> None:
    """Run one alarm's claimed occurrences, one after another, and report them together; a
    lost or duplicate message is harmless (each claim decides)."""
    runner.run_batch(user_id, claims)


@shared_task(name="jobs.run_job", queue="default", acks_late=True, ignore_result=True)
def run_job(user_id: str, job_id: str, claim_token: str) -> None:
    """One claimed occurrence (messages queued before ``jobs.run_batch`` existed)."""
    runner.run_claimed(user_id, job_id, claim_token)


@shared_task(name="jobs.dispatch_runs", queue="default", ignore_result=True)
def dispatch_runs(user_id: str, claims: list[dict[str, str]]) -> None:
    """Relayed by the outbox after the JobManager's claims commit: queue the claims' batch."""
    runner.send_runs(user_id, claims)


@shared_task(name="jobs.wake_alarms", queue="default", ignore_result=True)
def wake_alarms() -> int:
    """Every minute: cast due actor alarms, so a job every minute runs every minute.

    The kernel's ``actor_alarms`` lane does the same every five minutes and stays the
    backstop; a duplicate cast of one alarm is answered from its call record.
    """
    return runner.wake_due_alarms()
