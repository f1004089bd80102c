"""Plans, their limits, and which plan a person effectively has.

Ranks are free < standard < pro < max. The effective plan is the higher of the operator-set
``users.plan`` and the Stripe-derived ``users.stripe_plan``, except that an operator-set
``max`` always wins and Stripe can never grant ``max``. The two time-boxed Standard overlays
(the second-agent gift and referral credit) lift a *free* result to standard while unexpired.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB


class Plan(StrEnum):
    FREE = "free"
    STANDARD = "standard"
    PRO = "pro"
    MAX = "max"

    @property
    def rank(self) -> int:
        return PLAN_ORDER.index(self)

    @property
    def label(self) -> str:
        return self.value.capitalize()


PLAN_ORDER: tuple[Plan, ...] = (Plan.FREE, Plan.STANDARD, Plan.PRO, Plan.MAX)


class Kind(StrEnum):
    DAILY = "daily"  # UserMeter daily_counters, reset at UTC midnight
    COUNT = "count"  # rows counted where they live (tables, actors)
    BYTES = "bytes"  # a byte cap


@dataclass(frozen=True)
class Resource:
    name: str
    kind: Kind
    unit: str
    label: str


RESOURCES: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("execute_calls_per_day", Kind.DAILY, "calls", "Execute calls per day"),
        Resource("outbound_fetches_per_day", Kind.DAILY, "fetches", "Outbound fetches per day"),
        Resource("job_runs_per_day", Kind.DAILY, "runs", "Job runs per day"),
        Resource("email_sends_per_day", Kind.DAILY, "emails", "Emails sent per day"),
        Resource("email_receives_per_day", Kind.DAILY, "emails", "Emails received per day"),
        Resource("repos", Kind.COUNT, "repos", "Repos"),
        Resource("saved_packages", Kind.COUNT, "packages", "Saved packages"),
        Resource("scheduled_jobs", Kind.COUNT, "jobs", "Scheduled jobs"),
        Resource("package_services", Kind.COUNT, "services", "Running package services"),
        Resource(
            "persistent_package_services", Kind.COUNT, "services", "Persistent package services"
        ),
        Resource("repo_sessions", Kind.COUNT, "sessions", "Active repo sessions"),
        Resource("stored_email_messages", Kind.COUNT, "messages", "Stored email messages"),
        Resource("secrets", Kind.COUNT, "secrets", "Secrets"),
        Resource("concurrent_workflows", Kind.COUNT, "workflows", "Concurrent workflows"),
        Resource("storage_bytes", Kind.BYTES, "bytes", "Storage"),
        Resource("email_message_bytes", Kind.BYTES, "bytes", "Largest email message"),
    )
}

DAILY_RESOURCES: tuple[str, ...] = tuple(r.name for r in RESOURCES.values() if r.kind == Kind.DAILY)

# One column per plan, in PLAN_ORDER. Bytes are exact integers (KiB/MiB/GiB are binary).
_TABLE: dict[str, tuple[int, int, int, int]] = {
    "repos": (20, 200, 400, 10_000),
    "saved_packages": (15, 100, 200, 10_000),
    "scheduled_jobs": (5, 50, 150, 5_000),
    "package_services": (1, 10, 20, 1_000),
    "persistent_package_services": (0, 1, 3, 10),
    "repo_sessions": (15, 200, 400, 20_000),
    "email_sends_per_day": (10, 200, 500, 10_000),
    "email_receives_per_day": (50, 1_000, 2_000, 20_000),
    "stored_email_messages": (500, 10_000, 25_000, 100_000),
    "email_message_bytes": (256 * KIB, 768 * KIB, 768 * KIB, 768 * KIB),
    "secrets": (25, 100, 200, 10_000),
    "storage_bytes": (16 * MIB, 1 * GIB, 5 * GIB, 100 * GIB),
    "concurrent_workflows": (2, 50, 100, 5_000),
    "execute_calls_per_day": (250, 5_000, 10_000, 500_000),
    "outbound_fetches_per_day": (1_000, 20_000, 40_000, 2_000_000),
    "job_runs_per_day": (500, 10_000, 20_000, 1_000_000),
}

LIMITS: dict[Plan, dict[str, int]] = {
    plan: {resource: row[plan.rank] for resource, row in _TABLE.items()} for plan in PLAN_ORDER
}

# Published prices in US cents (display only; Stripe holds the real prices).
PRICES_CENTS: dict[Plan, dict[str, int]] = {
    Plan.STANDARD: {"month": 1_200, "year": 12_000},
    Plan.PRO: {"month": 2_900, "year": 28_800},
}


class UnknownResource(KeyError):
    pass


def resource(name: str) -> Resource:
    try:
        return RESOURCES[name]
    except KeyError:
        raise UnknownResource(name) from None


def limit_for(plan: Plan | str, name: str) -> int:
    resource(name)
    return LIMITS[Plan(plan)][name]


def parse_plan(value: str | None) -> Plan | None:
    if value is None or value == "":
        return None
    try:
        return Plan(value)
    except ValueError:
        return None


class PlanHolder(Protocol):
    plan: str
    stripe_plan: str | None
    second_agent_standard_gift_expires_at: datetime | None
    referral_standard_credit_expires_at: datetime | None


def effective_plan(
    operator_plan: str | None,
    stripe_plan: str | None,
    overlay_expiries: tuple[datetime | None, ...] = (),
    *,
    now: datetime,
) -> Plan:
    manual = parse_plan(operator_plan) or Plan.FREE
    if manual is Plan.MAX:
        return Plan.MAX
    billed = parse_plan(stripe_plan)
    if billed is Plan.MAX:
        billed = None  # Stripe never grants max, even if a price is misconfigured
    best = max((p for p in (manual, billed) if p is not None), key=lambda p: p.rank)
    if best is Plan.FREE and any(e is not None and e > now for e in overlay_expiries):
        return Plan.STANDARD
    return best


def overlay_expiries(user: PlanHolder) -> tuple[datetime | None, ...]:
    return (
        getattr(user, "second_agent_standard_gift_expires_at", None),
        getattr(user, "referral_standard_credit_expires_at", None),
    )


def effective_plan_for(user: PlanHolder, *, now: datetime) -> Plan:
    return effective_plan(user.plan, user.stripe_plan, overlay_expiries(user), now=now)


def next_overlay_expiry(user: PlanHolder, *, now: datetime) -> datetime | None:
    """When the effective plan may drop because an overlay runs out (bounds cache lifetimes)."""
    pending = [e for e in overlay_expiries(user) if e is not None and e > now]
    return min(pending) if pending else None
