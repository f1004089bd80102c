"""Scheduled lanes owned by accounts."""

from __future__ import annotations

from apps.accounts import campaigns
from apps.accounts.services import audit, retention
from kody.lanes import Cadence, LaneRun, lane
from kody.retention import Policy, run_policies


@lane("audit_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def audit_retention(run: LaneRun) -> None:
    """Drop audit_events older than 180 days, oldest first, in bounded batches."""
    run_policies(
        "audit_retention",
        [Policy("audit_events", audit.prune_expired, run.batch_size, "180 days")],
        record=run.record,
    )


@lane("accounts_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def accounts_retention(run: LaneRun) -> None:
    """Feature-flag exposure rollups (90 days by day) and terminal feedback (365 days)."""
    run_policies(
        "accounts_retention",
        [
            Policy(
                "feature_flag_exposure_rollups",
                retention.prune_flag_exposures,
                run.batch_size,
                "90 days by day",
            ),
            Policy(
                "platform_feedback",
                retention.prune_feedback,
                run.batch_size,
                "terminal rows 365 days after updated_at",
            ),
        ],
        record=run.record,
    )


@lane("account_deletion_resume", cadence=Cadence.EVERY_TICK, budget_seconds=120, batch_size=10)
def account_deletion_resume(run: LaneRun) -> None:
    """Carry on deletions a crashed worker or a failed step left open, oldest due first."""
    from django.db.models import Q
    from django.utils import timezone

    from apps.accounts.deletion import job
    from apps.accounts.models import AccountDeletion, DeletionStatus

    due = (
        AccountDeletion.objects.filter(status__in=[DeletionStatus.RUNNING, DeletionStatus.RETAINED])
        .filter(Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=timezone.now()))
        .order_by("next_attempt_at", "pk")
    )
    for deletion in due[: run.batch_size]:
        if run.out_of_time():
            break
        try:
            job.run(deletion)
        except job.DeletionInProgress:
            continue  # another run (the form, purge_account, another worker) has it
        run.record(1)


@lane("unverified_account_purge", cadence=Cadence.HOURLY, budget_seconds=120, batch_size=50)
def unverified_account_purge(run: LaneRun) -> None:
    """Delete password signups left unverified for seven days (never-attempted, oldest first)."""
    from apps.accounts.deletion import unverified

    outcomes = unverified.run_pass(limit=run.batch_size)
    run.record(sum(1 for outcome in outcomes if outcome.outcome == "purged"))


@lane("oauth_purge_expired", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=500)
def oauth_purge_expired(run: LaneRun) -> None:
    """Expired authorization codes, expired access tokens and dead refresh tokens."""
    from apps.accounts.oauth import grants

    counts = grants.purge_expired(batch=run.batch_size, out_of_time=run.out_of_time)
    run.record(sum(counts.values()))


@lane("usage_entitlement_alert", cadence=Cadence.HOURLY, budget_seconds=120, batch_size=200)
def usage_entitlement_alert(run: LaneRun) -> None:
    """Verified person accounts into their usage state; each state's mail once (campaigns,
    the advocate mail once ever, the entitlement warning for the most pressed)."""
    while not run.out_of_time():
        done = campaigns.sweep(run.cursor, run.batch_size, run.out_of_time)
        run.record(done.evaluated)
        run.count("changed", done.changed)
        run.count("mailed", done.mailed)
        if done.exhausted:
            run.save_cursor("")  # wrapped: the next run starts from the first account
            break
        if done.last_id:
            run.save_cursor(done.last_id)
