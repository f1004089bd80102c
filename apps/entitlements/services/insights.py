"""Platform-wide, content-free readouts of usage telemetry for the admin's insights page.

Every function here aggregates across users and returns only day/month labels and counts: no
user id leaves these queries. They are reporting reads (never on a request path a user waits
on) over ``usage_events`` (kept 90 days) and ``usage_rollups`` (kept 24 months).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from django.db.models import Count, Min, Sum
from django.db.models.functions import TruncDate

from apps.entitlements.models import UsageEvent, UsageRollup
from apps.entitlements.services.usage import DELIVERY_METRIC_PREFIX, month_key, month_start
from kody.charts import Chart, Series

WINDOW_DAYS = 28
TREND_MONTHS = 12
TREND_SERIES = 5  # the busiest metrics get their own series; the rest stack as "other"


def window_days(now: datetime, days: int = WINDOW_DAYS) -> list[date]:
    today = now.astimezone(UTC).date()
    return [today - timedelta(days=days - 1 - n) for n in range(days)]


def daily_counts(metrics: list[str], now: datetime, days: int = WINDOW_DAYS) -> dict[str, dict]:
    """{metric: {day: events}} for the last ``days`` UTC days, today included."""
    first = window_days(now, days)[0]
    start = datetime(first.year, first.month, first.day, tzinfo=UTC)
    found = (
        UsageEvent.objects.filter(metric__in=metrics, occurred_at__gte=start, occurred_at__lte=now)
        .annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .values("metric", "day")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts: dict[str, dict] = {metric: {} for metric in metrics}
    for row in found:
        counts[row["metric"]][row["day"]] = row["n"]
    return counts


def daily_chart(named: dict[str, str], now: datetime, days: int = WINDOW_DAYS) -> Chart:
    """A stacked daily chart, one series per metric (``named``: metric -> series name); days
    without events are zero-filled."""
    span = window_days(now, days)
    counts = daily_counts(list(named), now, days)
    return Chart(
        labels=[d.strftime("%m-%d") for d in span],
        series=[
            Series(name, [counts[metric].get(d, 0) for d in span]) for metric, name in named.items()
        ],
        label_every=7,
    )


DELIVERY_OUTCOMES = ("delivered", "deferred", "bounced", "complained", "failed")


def delivery_outcomes_chart(now: datetime) -> Chart:
    return daily_chart({f"{DELIVERY_METRIC_PREFIX}{o}": o for o in DELIVERY_OUTCOMES}, now)


def trend_months(now: datetime, months: int = TREND_MONTHS) -> list[str]:
    keys, start = [], month_start(now)
    for _ in range(months):
        keys.append(month_key(start))
        start = month_start(start - timedelta(days=1))
    return list(reversed(keys))


def monthly_trend(now: datetime, months: int = TREND_MONTHS) -> Chart:
    """Platform-wide events per month from the rollups, busiest metrics first."""
    keys = trend_months(now, months)
    rows = list(
        UsageRollup.objects.filter(month__gte=keys[0], month__lte=keys[-1])
        .values("metric", "month")
        .annotate(n=Sum("event_count"))
        .order_by()
    )
    totals: dict[str, int] = {}
    for row in rows:
        totals[row["metric"]] = totals.get(row["metric"], 0) + int(row["n"])
    top = sorted(totals, key=lambda metric: (-totals[metric], metric))[:TREND_SERIES]
    values: dict[str, dict[str, int]] = {metric: {} for metric in [*top, "other"]}
    for row in rows:
        metric = row["metric"] if row["metric"] in top else "other"
        values[metric][row["month"]] = values[metric].get(row["month"], 0) + int(row["n"])
    series = [Series(metric, [values[metric].get(k, 0) for k in keys]) for metric in top]
    if any(values["other"].values()):
        series.append(Series("other", [values["other"].get(k, 0) for k in keys]))
    return Chart(labels=keys, series=series, note="From the hourly usage rollups.")


def users_with_events(metrics: list[str], user_ids: list[str], since: datetime) -> int:
    """How many of ``user_ids`` have any event of ``metrics`` since ``since`` (a count only)."""
    return (
        UsageEvent.objects.filter(metric__in=metrics, user_id__in=user_ids, occurred_at__gte=since)
        .values("user_id")
        .distinct()
        .count()
    )


def first_event_at(user_ids: list[str], since: datetime) -> dict[str, datetime]:
    """Each of ``user_ids``' first event since ``since`` (the funnel's latency)."""
    rows = (
        UsageEvent.objects.filter(user_id__in=user_ids, occurred_at__gte=since)
        .values("user_id")
        .annotate(first=Min("occurred_at"))
        .order_by()
    )
    return {row["user_id"]: row["first"] for row in rows}
