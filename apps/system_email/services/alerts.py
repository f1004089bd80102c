"""Operator burst alerts: auth denials and bounce/complaint bursts, mailed once per burst.

Each hourly run compares the last full UTC hour with a baseline (the mean of the 24 hours
before it). A burst is an hour at or over ``max(min_count, factor * baseline)``. The first run
that sees a burst flips the alert's row from quiet to active with a conditional update and
mails the operators only when that update changed the row, so concurrent or repeated runs mail
once; an hour back under the threshold closes the burst and the next one mails again. The mail
carries counts only, never an address, hash or message content.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from apps.accounts.models import AuditEvent, User
from apps.mailbox.models import EmailDeliveryAlertEvent
from apps.system_email.models import OperatorAlert
from apps.system_email.services import outbound

log = logging.getLogger(__name__)

BASELINE_HOURS = 24
# email_delivery_alert_events are short-lived signals: kept a week, past any baseline window.
DELIVERY_SIGNAL_DAYS = 7


@dataclass(frozen=True)
class Rule:
    key: str
    what: str
    min_count: int
    factor: float
    sender: str  # a system local

    def threshold(self, baseline: float) -> float:
        return max(float(self.min_count), self.factor * baseline)


AUTH_DENIAL = Rule("auth_denial", "auth denials", min_count=50, factor=4.0, sender="security")
EMAIL_DELIVERY = Rule(
    "email_delivery", "bounces and complaints", min_count=20, factor=4.0, sender="postmaster"
)


@dataclass(frozen=True)
class Verdict:
    count: int
    baseline: float
    burst: bool
    mailed: bool


def count_auth_denials(start: datetime, end: datetime) -> int:
    return AuditEvent.objects.filter(
        Q(category__in=("auth", "oauth")),
        Q(result__in=("failure", "rate_limited")),
        timestamp__gte=start,
        timestamp__lt=end,
    ).count()


def count_delivery_signals(start: datetime, end: datetime) -> int:
    return EmailDeliveryAlertEvent.objects.filter(
        occurred_at__gte=start, occurred_at__lt=end
    ).count()


def last_full_hour(now: datetime) -> tuple[datetime, datetime]:
    end = now.replace(minute=0, second=0, microsecond=0)
    return end - timedelta(hours=1), end


def evaluate(
    rule: Rule, count_between: Callable[[datetime, datetime], int], now: datetime
) -> Verdict:
    start, end = last_full_hour(now)
    count = count_between(start, end)
    baseline = count_between(start - timedelta(hours=BASELINE_HOURS), start) / BASELINE_HOURS
    burst = count >= rule.threshold(baseline)
    OperatorAlert.objects.bulk_create([OperatorAlert(key=rule.key)], ignore_conflicts=True)
    if not burst:
        OperatorAlert.objects.filter(key=rule.key).update(
            active=False, last_count=count, last_baseline=baseline, last_window_end=end
        )
        return Verdict(count, baseline, burst=False, mailed=False)
    opened = OperatorAlert.objects.filter(key=rule.key, active=False).update(
        active=True,
        burst_started_at=start,
        notified_at=timezone.now(),
        last_count=count,
        last_baseline=baseline,
        last_window_end=end,
    )
    if opened != 1:
        OperatorAlert.objects.filter(key=rule.key).update(
            last_count=count, last_baseline=baseline, last_window_end=end
        )
        return Verdict(count, baseline, burst=True, mailed=False)
    return Verdict(count, baseline, burst=True, mailed=_mail(rule, count, baseline, start, end))


def recipients() -> list[str]:
    configured = [a for a in settings.KODY_OPERATOR_ALERT_EMAILS if "@" in a]
    if configured:
        return configured
    staff = User.objects.filter(is_staff=True, is_active=True).order_by("id")
    return [email for email in staff.values_list("email", flat=True) if email]


def mail_operators(sender: str, subject: str, text: str) -> bool:
    """One message from a system local to the operators; False when nobody is configured or
    the provider refused it (the failure is kept in the system mail graph)."""
    to = recipients()
    if not to:
        log.warning("operator alert %r not mailed: no operator address", subject)
        return False
    sent = outbound.send(sender, to, subject, text)
    return sent.processing_status == "sent"


def _mail(rule: Rule, count: int, baseline: float, start: datetime, end: datetime) -> bool:
    subject = f"[Kody alert] Burst of {rule.what}: {count} in the hour to {end:%H:%M} UTC"
    text = (
        f"{count} {rule.what} between {start:%Y-%m-%d %H:%M} and {end:%H:%M} UTC, against a "
        f"baseline of {baseline:.1f} per hour over the previous {BASELINE_HOURS} hours "
        f"(threshold {rule.threshold(baseline):.0f}).\n\n"
        "This alert is sent once per burst; the next one follows only after an hour back "
        "under the threshold. Details: /admin/ (audit log, delivery alerts, system health)."
    )
    return mail_operators(rule.sender, subject, text)


def prune_delivery_signals(now: datetime | None = None, *, batch: int = 5000) -> int:
    cutoff = (now or timezone.now()) - timedelta(days=DELIVERY_SIGNAL_DAYS)
    ids = list(
        EmailDeliveryAlertEvent.objects.filter(occurred_at__lt=cutoff)
        .order_by("occurred_at")
        .values_list("provider_event_id", flat=True)[:batch]
    )
    return EmailDeliveryAlertEvent.objects.filter(provider_event_id__in=ids).delete()[0]
