"""Content-free job and activation readouts for the admin's insights page.

Workflow status totals come from the ``jobs`` table's ``last_run_status`` anchor (one grouped
query over a public table, not a read of every user's run log); the activation funnel counts,
among people who signed up in the window, how many reached each stage. Only counts leave here.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from statistics import median

from django.db.models import Count

from apps.accounts.models import User
from apps.entitlements.services import insights as usage_insights
from apps.jobs.models import Job
from kody.charts import Chart, Series

WINDOW = timedelta(days=usage_insights.WINDOW_DAYS)
# The funnel is read over at most this many of the newest signups, so the page stays bounded.
FUNNEL_COHORT_CAP = 20_000


def workflow_status_chart(now: datetime) -> Chart:
    rows = (
        Job.objects.filter(last_run_at__gte=now - WINDOW, last_run_at__lte=now)
        .values("last_run_status")
        .annotate(n=Count("id"))
        .order_by("last_run_status")
    )
    totals = {(row["last_run_status"] or "unknown"): row["n"] for row in rows}
    labels = sorted(totals)
    return Chart(
        labels=labels,
        series=[Series("jobs", [totals[label] for label in labels])],
        note="Jobs by the status of their latest run, for jobs that ran in the last 28 days.",
    )


FUNNEL_STAGES = ("signed up", "verified email", "first metered call", "first job run")


def activation_funnel_chart(now: datetime) -> Chart:
    since = now - WINDOW
    cohort = User.objects.filter(created_at__gte=since, created_at__lte=now).order_by("-created_at")
    people = list(
        cohort.values_list("stable_user_id", "email_verified_at", "created_at")[:FUNNEL_COHORT_CAP]
    )
    ids = [str(uid) for uid, _, _ in people]
    first = usage_insights.first_event_at(ids, since) if ids else {}
    counts = [
        len(people),
        sum(1 for _, verified, _ in people if verified is not None),
        len(first),
        usage_insights.users_with_events(["job_runs_per_day"], ids, since) if ids else 0,
    ]
    return Chart(
        labels=list(FUNNEL_STAGES),
        series=[Series("people", counts)],
        note="Of the people who signed up in the last 28 days, how many reached each stage."
        + _latency(people, first),
    )


def _latency(people: list[tuple[str, object, datetime]], first: dict[str, datetime]) -> str:
    hours = sorted(
        (first[uid] - created).total_seconds() / 3600 for uid, _, created in people if uid in first
    )
    if not hours:
        return ""
    return f" Median time from signup to the first metered call: {median(hours):.1f} h."
