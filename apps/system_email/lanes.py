"""System mail's scheduled lanes: hourly retention of the operator inbox, and the operator
burst alerts (auth denials, bounce/complaint bursts) that mail from the system locals."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.utils import timezone

from apps.system_email.services import alerts, retention
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


def _alert_lane(
    run: LaneRun, rule: alerts.Rule, count: Callable[[datetime, datetime], int]
) -> None:
    verdict = alerts.evaluate(rule, count, timezone.now())
    run.record(verdict.count)
    run.count("baseline_x10", round(verdict.baseline * 10))
    run.count("burst", int(verdict.burst))
    run.count("mailed", int(verdict.mailed))


@lane("auth_denial_alert", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1)
def auth_denial_alert(run: LaneRun) -> None:
    """Auth and OAuth denials (failures, rate limits) in the last full hour vs the baseline."""
    _alert_lane(run, alerts.AUTH_DENIAL, alerts.count_auth_denials)


@lane("email_delivery_alert", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=5000)
def email_delivery_alert(run: LaneRun) -> None:
    """Bounces and complaints in the last full hour vs the baseline; then a week-old prune of
    the short-lived signals."""
    _alert_lane(run, alerts.EMAIL_DELIVERY, alerts.count_delivery_signals)
    run.count("pruned", alerts.prune_delivery_signals(batch=run.batch_size))
