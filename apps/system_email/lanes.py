"""System mail's scheduled lane: hourly retention of the operator inbox."""

from __future__ import annotations

from apps.system_email.services import retention
from kody.lanes import Cadence, LaneRun, lane
from kody.retention import Policy, run_policies


@lane("system_email_retention", cadence=Cadence.HOURLY, budget_seconds=120, batch_size=200)
def system_email_retention(run: LaneRun) -> None:
    """Messages (blobs first) past 90 days or the 5,000 cap, delivery events past 90 days,
    week-old counters, orphan threads; round-robin through ``kody.retention``."""
    run_policies(
        "system_email_retention",
        [
            Policy(
                "system_email_messages",
                retention.prune_messages,
                run.batch_size,
                "90 days or 5,000 messages",
            ),
            Policy(
                "system_email_delivery_events", retention.prune_events, run.batch_size, "90 days"
            ),
            Policy(
                "system_email_daily_counters", retention.prune_counters, run.batch_size, "7 days"
            ),
            Policy("system_email_threads", retention.prune_threads, run.batch_size, "orphans"),
        ],
        record=run.record,
    )
