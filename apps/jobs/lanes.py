"""Lanes of jobs: the schedule watchdog and job retention."""

from __future__ import annotations

from django.db import connection, transaction
from django.utils import timezone

from apps.entitlements.services import release_storage_bytes
from apps.jobs.actor.manager import JobManager
from apps.packages.services.vector_kinds import KINDS, forget
from kody.lanes import Cadence, LaneRun, lane
from kody.retention import Policy, run_policies
from kody.userschema.models import UserSchema

# Users with a due, unclaimed (or lease-expired) job whose scheduler alarm is missing or later
# than that job: the alarm was lost (a purge, a bug, a restored backup). Uses jobs_due_ix.
_STRANDED = f"""
SELECT j.user_id, min(j.next_run_at)
  FROM jobs j
 WHERE j.enabled AND NOT j.kill_switch_enabled AND j.next_run_at <= %(now)s
   AND (j.claim_token IS NULL OR j.lease_expires_at <= %(now)s)
   AND j.user_id > %(after)s
 GROUP BY j.user_id
HAVING NOT EXISTS (
    SELECT 1 FROM {UserSchema._meta.db_table} s
     WHERE s.user_id = j.user_id AND s.alarm_at <= min(j.next_run_at))
 ORDER BY j.user_id
 LIMIT %(limit)s
"""


def stranded_users(after: str, limit: int) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(_STRANDED, {"now": timezone.now(), "after": after, "limit": limit})
        return [row[0] for row in cursor.fetchall()]


@lane("job_schedule_watchdog", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=200)
def job_schedule_watchdog(run: LaneRun) -> None:
    after = ""
    while not run.out_of_time():
        users = stranded_users(after, run.batch_size)
        for user_id in users:
            JobManager.cast(user_id, "sync")
        run.record(len(users))
        if len(users) < run.batch_size:
            break
        after = users[-1]


# --- job_retention ------------------------------------------------------------------------

DEFAULT_SUCCESS_ONCE_DAYS = 14
DEFAULT_FAILED_ONCE_DAYS = 60
DEFAULT_DISABLED_RECURRING_DAYS = 90

# Completed one-off jobs and disabled recurring ones past the owner's window (users columns,
# NULL = the defaults). Never preserved, package-owned, enabled or claimed jobs.
_EXPIRED_JOBS = """
WITH doomed AS (
    SELECT j.id FROM jobs j
      LEFT JOIN users u ON u.stable_user_id = j.user_id
     WHERE NOT j.preserved AND NOT j.enabled AND j.claim_token IS NULL
       AND j.source_id = '' AND j.id NOT LIKE 'package-job:%%'
       AND CASE
           WHEN j.schedule_json->>'type' = 'once' AND j.last_run_status = 'success'
           THEN j.last_run_at < %(now)s - make_interval(
                days => COALESCE(u.job_retention_success_once_days, %(success)s))
           WHEN j.schedule_json->>'type' = 'once' AND j.last_run_status = 'error'
           THEN j.last_run_at < %(now)s - make_interval(
                days => COALESCE(u.job_retention_failed_once_days, %(failed)s))
           WHEN j.schedule_json->>'type' <> 'once'
           THEN j.updated_at < %(now)s - make_interval(
                days => COALESCE(u.job_retention_disabled_recurring_days, %(disabled)s))
           ELSE false
           END
     LIMIT %(batch)s
)
DELETE FROM jobs WHERE id IN (SELECT id FROM doomed)
   AND NOT enabled AND claim_token IS NULL AND NOT preserved
RETURNING user_id, id, octet_length(jobs.*::text)
"""


def prune_jobs(batch: int) -> int:
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            _EXPIRED_JOBS,
            {
                "now": timezone.now(),
                "success": DEFAULT_SUCCESS_ONCE_DAYS,
                "failed": DEFAULT_FAILED_ONCE_DAYS,
                "disabled": DEFAULT_DISABLED_RECURRING_DAYS,
                "batch": batch,
            },
        )
        gone = cursor.fetchall()
        forget(KINDS["job"], [(user_id, job_id) for user_id, job_id, _ in gone])
        freed: dict[str, int] = {}
        for user_id, _, size in gone:
            freed[user_id] = freed.get(user_id, 0) + int(size)
        # The owners' storage meters get the rows' bytes back once the delete is committed.
        transaction.on_commit(lambda: _release(freed))
    return len(gone)


def _release(freed: dict[str, int]) -> None:
    for user_id, size in freed.items():
        release_storage_bytes(user_id, size)


def prune_archived_artifacts(batch: int) -> int:
    from apps.jobs.models import ArchivedJobArtifact

    ids = list(
        ArchivedJobArtifact.objects.filter(retain_until__lt=timezone.now())
        .order_by("retain_until")
        .values_list("id", flat=True)[:batch]
    )
    return ArchivedJobArtifact.objects.filter(id__in=ids).delete()[0]


@lane("job_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=500)
def job_retention(run: LaneRun) -> None:
    run_policies(
        "job_retention",
        [
            Policy("jobs", prune_jobs, run.batch_size, "14/60/90 days per user"),
            Policy("archived_job_artifacts", prune_archived_artifacts, run.batch_size),
        ],
        record=run.record,
    )
