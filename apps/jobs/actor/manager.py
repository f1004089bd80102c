"""JobManager: a user's job scheduler (SCHEMA.md §2.5), the only writer of their ``jobs`` rows.

Design note. The job rows are public (``jobs``), but every write to one user's rows goes through
this actor, so it runs under that user's owner-row lock and re-arms the alarm in the same
transaction as the change. The alarm claims at most ``KODY_MAX_DUE_JOBS_PER_ALARM`` due jobs,
oldest ``next_run_at`` first, and re-arms about a second later while more are due. A claim sets
a fresh ``claim_token`` and ``lease_expires_at``; the run itself happens on the default queue
after commit (a capability call may need this user's other actors, which a shard worker must
never wait for): the claim writes a ``jobs.dispatch_runs`` message to the transactional outbox
in the same transaction, so a worker that dies right after COMMIT loses no run — the
``outbox_relay`` lane sends it (``transaction.on_commit`` work would be lost, leaving the run to
wait out its lease). The claim also charges the run's ``job_runs_per_day`` through the UserMeter
in this same transaction (``consume_in_call``, as the Mailbox charges a delivery), not as a
queue round trip of its own from the run: the charge commits exactly when the claim does, so
each claim (the first try, a retry, a reclaim after a lease ran out) is charged once with no key
needed, and a claim the limit refuses is recorded at once as a ``limit_reached`` run and its
schedule advanced, nothing dispatched. A delivery of the claims' batch first ``start``s them:
the claims still its token's and not started by another delivery (``started_by``) become its
own and only those run, so a message delivered twice runs each claim once; every new claim
clears ``started_by``. The run reports back with ``finish``, which checks the
token, writes the run record (RunLog's tables, same schema) and the next schedule in one
transaction. A run whose worker died keeps its claim until the lease expires; the next alarm
then reclaims it as a retry, unless the run record of that occurrence already exists (it
finished but the report was lost), in which case it only advances the schedule. So a job never
runs twice concurrently, and each occurrence runs at most once unless a worker dies between
doing the work and reporting it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from django.db.models import Min, Q
from django.utils import timezone

from apps.entitlements.services import LimitReached, consume_in_call, count_limit
from apps.jobs import schedules
from apps.jobs.actor import models as am
from apps.jobs.actor import records, stored
from apps.jobs.actor.claims import (  # noqa: F401  (callers import these from here)
    BACKLOG_REARM,
    CATCH_UP,
    CLAIM_FIELDS,
    DISPATCH_TASK,
    KILLED_POLL,
    LEASE,
    MAX_RETRIES,
    MIN_LEASE_LEFT,
    REPORT_FIELDS,
    RETRY_BASE,
    Claim,
    Outcome,
    Report,
    _scheduler_killed,
    _write_rows,
    error_name,
    failed_outcome,
    max_due_per_alarm,
    occurrence_key,
    retry_delay,
)
from apps.jobs.models import Job
from apps.packages.services import index_debt
from kody import outbox
from kody.actors import Actor, deletion_safe
from kody.fields import new_id
from kody.outbox.core import CLAIM_LEASE

log = logging.getLogger("apps.jobs")


class JobManager(Actor):
    name = "jobs.JobManager"
    tables = am.RUN_TABLES  # it records runs through records.py

    # --- writes to the user's jobs -----------------------------------------------------

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        row = Job(**job, user_id=self.user_id)
        for field in ("next_run_at", "expires_at"):
            if isinstance(getattr(row, field), str):
                setattr(row, field, datetime.fromisoformat(getattr(row, field)))
        # The plan's scheduled_jobs limit, counted and inserted under one lock (a count taken
        # before this call raced: 20 parallel schedules made 8 jobs of a limit of 5).
        with count_limit(self.user_id, "scheduled_jobs") as slot:
            slot.take()
            row.save(force_insert=True)
            # The new row's bytes, refused past storage_bytes: the call rolls back, no job.
            grown = stored.job_rows(self.user_id, [row.id])
            stored.charge(self.context, grown, force=stored.package_owned(row.id))
        index_debt.changed("job", self.user_id, [row.id])
        self._arm()
        return {"id": row.id, "nextRunAt": row.next_run_at.isoformat()}

    def update(self, job_id: str, changes: dict[str, Any]) -> bool:
        rows = self._mine(job_id)
        if "next_run_at" in changes:
            changes["next_run_at"] = datetime.fromisoformat(changes["next_run_at"])
        if "expires_at" in changes and changes["expires_at"] is not None:
            changes["expires_at"] = datetime.fromisoformat(changes["expires_at"])
        force = stored.package_owned(job_id) or not stored.DEFINITION & set(changes)
        with stored.JobRowsWeighed(self.context, [job_id], force=force):
            changed = rows.update(**changes, updated_at=timezone.now()) == 1
        if changed:
            index_debt.changed("job", self.user_id, [job_id])
        self._arm()
        return changed

    def delete(self, job_id: str) -> bool:
        with stored.JobRowsWeighed(self.context, [job_id]):
            deleted = self._mine(job_id).delete()[0] > 0
        index_debt.changed("job", self.user_id, [job_id])  # removes its vector
        self._arm()
        return deleted

    def run_now(self, job_id: str) -> bool:
        """Make the job due now; a job already running is left alone (no concurrent run)."""
        now = timezone.now()
        with stored.JobRowsWeighed(self.context, [job_id], force=True):
            changed = (
                self._mine(job_id)
                .filter(claim_token__isnull=True, kill_switch_enabled=False)
                .update(next_run_at=now, enabled=True, updated_at=now)
            )
        if changed:
            self.set_alarm(now)
        return changed == 1

    def sync(self) -> str | None:
        """Re-arm the alarm from the jobs table (the watchdog's repair)."""
        at = self._arm(exact=True)
        return at.isoformat() if at else None

    # --- the alarm and the claim ------------------------------------------------------

    def alarm(self) -> None:
        claims = self._claim_due()
        if claims:
            self._dispatch(claims)

    def _claim_due(self) -> list[Claim]:
        now = timezone.now()
        mine = Job.objects.filter(user_id=self.user_id)
        stored.charge(self.context, stored.expire_jobs(self.user_id, now), force=True)
        if _scheduler_killed():
            self.clear_alarm()
            self.set_alarm(now + KILLED_POLL)  # look again later; nothing runs meanwhile
            return []
        limit = max_due_per_alarm()
        due = list(
            mine.filter(enabled=True, kill_switch_enabled=False, next_run_at__lte=now)
            .filter(Q(claim_token__isnull=True) | Q(lease_expires_at__lte=now))
            .order_by("next_run_at", "id")
            .select_for_update()[: limit + 1]
        )
        claims = self._claim_many(due[:limit], now)
        if len(due) > limit:
            self.set_alarm(now + BACKLOG_REARM)
        else:
            self._arm()
        return claims

    def _claim(self, job: Job, now: datetime) -> Claim | None:
        claims = self._claim_many([job], now)
        return claims[0] if claims else None

    def _claim_many(self, jobs: list[Job], now: datetime) -> list[Claim]:
        """Claim these due jobs: each claim's charge commits with it (see the design note).
        The claims are charged together when all fit under the limit (one counter UPDATE for
        the alarm), else one by one, so those that fit still run and the rest are refused."""
        ready = [job for job in jobs if self._ready(job, now)]
        if not ready:
            return []
        try:
            consume_in_call(self.context, "job_runs_per_day", len(ready), now=now)
            charged = ready
        except LimitReached:
            charged = [job for job in ready if self._charge_one(job, now)]
        for job in charged:
            job.claim_token = new_id()
            job.running_since = now
            job.lease_expires_at = now + LEASE
            job.started_by = None  # "started" belongs to a token: this claim is not, yet
        stored.charge(self.context, _write_rows(charged, CLAIM_FIELDS), force=True)
        return [{"job_id": job.id, "claim_token": str(job.claim_token)} for job in charged]

    def _ready(self, job: Job, now: datetime) -> bool:
        """Settle a job whose lease ran out (its run reported after all, or its retries are
        used up) or mark it a retry; pick the occurrence the claim is for."""
        if job.claim_token is not None:  # the lease ran out: the worker died mid-run
            key = occurrence_key(job.id, job.claimed_scheduled_for or job.next_run_at)
            if am.Run.objects.filter(idempotency_key=key, surface="job").exists():
                self._advance(job, now, status=job.last_run_status or "success")
                return False
            if job.retry_count >= MAX_RETRIES:
                self._record_lost(job, now)
                self._advance(job, now, status="error")
                return False
            job.retry_count += 1
        scheduled_for = job.claimed_scheduled_for if job.claim_token else None
        job.claimed_scheduled_for = scheduled_for or job.retry_scheduled_for or job.next_run_at
        return True

    def _charge_one(self, job: Job, now: datetime) -> bool:
        try:
            consume_in_call(self.context, "job_runs_per_day", now=now)
        except LimitReached as exc:  # refused: recorded and advanced as a finished run would be
            self._write_records(
                job.id, job, job.claimed_scheduled_for, failed_outcome(now, exc, retryable=False)
            )
            self._advance(job, now, status="error")
            return False
        return True

    def _record_lost(self, job: Job, now: datetime) -> None:
        records.record_run(
            self.context,
            {
                "surface": "job",
                "status": "error",
                "name": job.name,
                "job_id": job.id,
                "storage_id": job.storage_id,
                "idempotency_key": occurrence_key(job.id, job.claimed_scheduled_for or now),
                "started_at": job.running_since or now,
                "finished_at": now,
                "error_name": "LeaseExpired",
                "error_message": "The run stopped reporting and its retries are used up.",
            },
        )

    # --- the report from a run --------------------------------------------------------

    def start(self, claims: list[Claim], delivery: str) -> dict[str, str]:
        """A batch's start, the compare-and-set that lets ONE delivery of it run each claim
        (a Celery message can be delivered twice: a redelivery after a broker restart, a
        worker lost with ``acks_late``). For each claim still its token's, unexpired and not
        started by another delivery: mark it started by ``delivery``, and renew a lease with
        less than ``MIN_LEASE_LEFT`` ahead to ``LEASE`` from now, but never past
        ``CLAIM_LEASE`` after the claim (a dispatch the outbox repeats arrives only after that,
        and must still find the lease over). Answers the lease of each claim this delivery
        may run; a claim left out must not run. The same delivery may call again (a long
        batch renewing what it has left); a claim's next claim (a retry after its lease ran
        out) has a new token and starts afresh.

        A claim whose lease ran out while its batch waited in a backed-up queue still starts
        if the alarm has not claimed it again (its token is unchanged and no delivery started
        it: nothing ran it, and the alarm changes the token under this same lock) and the
        renewal can still give it ``MIN_LEASE_LEFT``. Refusing it would only have the alarm
        reclaim it as a retry, charge it again and queue it behind the backlog it waited in."""
        now = timezone.now()
        tokens = {claim["job_id"]: claim["claim_token"] for claim in claims}
        started: dict[str, str] = {}
        changed: list[Job] = []
        rows = (
            Job.objects.select_for_update()
            .filter(user_id=self.user_id, id__in=list(tokens), lease_expires_at__isnull=False)
            .order_by("id")
        )
        for job in rows:
            if job.claim_token != tokens[job.id] or job.running_since is None:
                continue  # no longer this claim
            if job.started_by not in (None, delivery):
                continue  # another delivery of the batch runs it
            over = job.lease_expires_at <= now
            until = job.lease_expires_at
            if until - now < MIN_LEASE_LEFT:
                until = max(until, min(now + LEASE, job.running_since + CLAIM_LEASE))
            if over and until - now < MIN_LEASE_LEFT:
                continue  # over, and no renewal can give it a run's worth: the alarm's now
            if job.started_by != delivery or until != job.lease_expires_at:
                job.started_by, job.lease_expires_at = delivery, until
                changed.append(job)
            started[job.id] = until.isoformat()
        grown = _write_rows(changed, ["started_by", "lease_expires_at"])
        stored.charge(self.context, grown, force=True)
        return started

    def finish(self, job_id: str, claim_token: str, outcome: Outcome) -> dict[str, Any]:
        """One run's report (``finish_many`` with one report)."""
        report: Report = {"job_id": job_id, "claim_token": claim_token, "outcome": outcome}
        return self.finish_many([report])[0]

    def finish_many(self, reports: list[Report]) -> list[dict[str, Any]]:
        """The reports of a batch of runs (``runner.run_batch``), in one call and one
        transaction: each checks its own claim token, writes its run records and its next
        schedule exactly as a lone report would; the catch-up claims they make go out in one
        dispatch and the alarm is re-armed once."""
        ids = [report["job_id"] for report in reports]
        jobs = {
            job.id: job
            for job in Job.objects.select_for_update()
            .filter(id__in=ids, user_id=self.user_id)
            .order_by("id")
        }
        results, caught_up, moved = [], [], []
        written: list[tuple[dict[str, Any], list[dict[str, Any]] | None]] = []
        for report in reports:
            job = jobs.get(report["job_id"])
            results.append(
                self._finish_one(
                    report["job_id"], job, report["claim_token"], report["outcome"], written
                )
            )
            advanced = results[-1].pop("advanced")
            if job is not None and results[-1]["applied"]:
                moved.append(job)
            claim = self._catch_up(job, timezone.now()) if advanced and job else None
            if claim is not None:
                caught_up.append(claim)
        grown = 0
        if moved:  # one UPDATE for the batch's rows, catch-up claims included
            now = timezone.now()
            for job in moved:
                job.updated_at = now
            grown = _write_rows(moved, REPORT_FIELDS)
        # One meter charge for the rows' growth and the run records (see ``stored``).
        records.record_runs(self.context, written, forced=grown)
        if caught_up:
            self._dispatch(caught_up)
        # Exactly: the alarm the claims set at their leases' end goes with them. Kept (set
        # never postpones), it fired for nothing two minutes after every run — 500 no-op
        # alarms after a drain of 500 users, due together ahead of the next wake's real ones.
        self._arm(exact=True)
        return results

    def _finish_one(
        self,
        job_id: str,
        job: Job | None,
        claim_token: str,
        outcome: Outcome,
        written: list[tuple[dict[str, Any], list[dict[str, Any]] | None]],
    ) -> dict[str, Any]:
        """Check the claim, add the run's records to ``written``, move the schedule."""
        current = job is not None and job.claim_token == claim_token
        scheduled_for = job.claimed_scheduled_for if job is not None and current else None
        items = self._run_records(job_id, job, scheduled_for, outcome)
        written += items
        run_id = items[0][0]["id"]
        if job is None or not current:
            return {"runId": run_id, "applied": False, "advanced": False}
        now = timezone.now()
        if outcome.get("status") == "skipped":
            # Not run: its grant or its owner may no longer act. Disabled with the reason
            # (shown in jobGet and the account UI) until the owner re-enables it.
            job.enabled = False
            job.disabled_reason = str(outcome.get("skip_reason") or "skipped")[:64]
            job.last_completed_scheduled_for = job.claimed_scheduled_for or job.next_run_at
            job.last_run_at, job.last_run_status = now, "skipped"
            job.retry_count = 0
            job.retry_scheduled_for = None
            self._release(job)
            return {"runId": run_id, "applied": True, "advanced": False}
        failed = outcome.get("status") != "success"
        if failed and outcome.get("retryable") and job.retry_count < MAX_RETRIES:
            job.retry_count += 1
            job.retry_scheduled_for = job.claimed_scheduled_for
            job.next_run_at = now + retry_delay(job.retry_count)
            job.last_run_at, job.last_run_status = now, "error"
            self._release(job)
            return {"runId": run_id, "applied": True, "advanced": False}
        self._advance(job, now, status="error" if failed else "success", save=False)
        return {"runId": run_id, "applied": True, "advanced": True}

    def _catch_up(self, job: Job, now: datetime) -> Claim | None:
        """An occurrence missed while workers or beat were down is due already: claim it now
        rather than one per wake, so a backlog drains instead of trailing behind forever."""
        if not job.enabled or job.kill_switch_enabled or job.next_run_at > now:
            return None
        if (job.expires_at is not None and job.expires_at <= now) or _scheduler_killed():
            return None
        return self._claim(job, now)

    def _dispatch(self, claims: list[Claim]) -> None:
        """Queue the claimed runs through the outbox, committed with the claims."""
        outbox.enqueue(
            DISPATCH_TASK,
            {"user_id": self.user_id, "claims": claims},
            key=f"jobs.dispatch:{self.user_id}:{claims[0]['claim_token']}",
        )

    def _write_records(
        self, job_id: str, job: Job | None, scheduled_for: datetime | None, outcome: Outcome
    ) -> str:
        items = self._run_records(job_id, job, scheduled_for, outcome)
        return records.record_runs(self.context, items)[0]

    @staticmethod
    def _run_records(
        job_id: str, job: Job | None, scheduled_for: datetime | None, outcome: Outcome
    ) -> list[tuple[dict[str, Any], list[dict[str, Any]] | None]]:
        """The job run's record (first) and one child record per capability call it made."""
        run_id = new_id()
        run: dict[str, Any] = {
            "id": run_id,
            "surface": "job",
            "status": "success" if outcome.get("status") == "success" else "error",
            "name": job.name if job else job_id,
            "job_id": job_id,
            "storage_id": job.storage_id if job else None,
            "source_id": (job.source_id or None) if job else None,
            "idempotency_key": occurrence_key(job_id, scheduled_for) if scheduled_for else None,
            "started_at": outcome["started_at"],
            "finished_at": outcome["finished_at"],
            "error_name": outcome.get("error_name"),
            "error_message": outcome.get("error_message"),
            "metadata_json": {"scheduledFor": scheduled_for.isoformat()}
            if scheduled_for
            else {"stale": True},
        }
        if outcome.get("skip_reason"):
            # The run log's statuses are running/success/error (SCHEMA.md): a skipped run is
            # an error named "skipped", its reason kept apart in the metadata.
            run["metadata_json"] = {**run["metadata_json"], "skipped": outcome["skip_reason"]}
        items: list[tuple[dict[str, Any], list[dict[str, Any]] | None]] = [
            (run, outcome.get("lines"))
        ]
        for call in outcome.get("calls", []):
            items.append(({**call, "job_id": job_id, "parent_run_id": run_id}, None))
        return items

    def _advance(self, job: Job, now: datetime, *, status: str, save: bool = True) -> None:
        """Finish this occurrence and move to the next one that is after now (``save=False``:
        the caller writes the row, as ``finish_many`` writes all of its rows at once)."""
        scheduled = job.claimed_scheduled_for or job.next_run_at
        upcoming = schedules.next_run_at(job.schedule_json, job.timezone, scheduled)
        if upcoming is not None and upcoming < now - CATCH_UP:
            upcoming = schedules.next_run_at(job.schedule_json, job.timezone, now - CATCH_UP)
        job.last_completed_scheduled_for = job.claimed_scheduled_for or job.next_run_at
        job.last_run_at, job.last_run_status = now, status
        job.retry_count = 0
        job.retry_scheduled_for = None
        job.disabled_reason = None  # it ran: whatever disabled it before no longer holds
        if upcoming is None:
            job.enabled = False  # a one-off that ran, or a schedule with nothing left
        else:
            job.next_run_at = upcoming
        self._release(job)
        if save:
            job.updated_at = now
            stored.charge(self.context, _write_rows([job], REPORT_FIELDS), force=True)

    @staticmethod
    def _release(job: Job) -> None:
        job.claim_token = None
        job.running_since = None
        job.lease_expires_at = None
        job.started_by = None
        job.claimed_scheduled_for = None

    # --- arming -----------------------------------------------------------------------

    def _arm(self, *, exact: bool = False) -> datetime | None:
        """Wake at the earliest enabled next run or the earliest lease expiry."""
        mine = Job.objects.filter(user_id=self.user_id, enabled=True, kill_switch_enabled=False)
        found = mine.aggregate(
            due=Min("next_run_at", filter=Q(claim_token__isnull=True)),
            lease=Min("lease_expires_at", filter=Q(claim_token__isnull=False)),
        )
        at = min((t for t in (found["due"], found["lease"]) if t is not None), default=None)
        if exact:
            self.clear_alarm()
        if at is not None:
            self.set_alarm(at)
        return at

    def _mine(self, job_id: str) -> Any:
        return Job.objects.filter(id=job_id, user_id=self.user_id)

    # --- deletion and export ----------------------------------------------------------

    @deletion_safe
    def export_state(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """The scheduler's alarm state (the jobs themselves export as a public table)."""
        at = Job.objects.filter(
            user_id=self.user_id, enabled=True, kill_switch_enabled=False
        ).aggregate(at=Min("next_run_at"))["at"]
        return {"nextAlarmAt": at.isoformat() if at else None, "next_cursor": None}

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        self.clear_alarm()
        return {"deleted": {}, "alarm": "cleared"}
