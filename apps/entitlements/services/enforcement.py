"""Plan enforcement on the hot path.

Design note: ``consume`` is exactly one UserMeter actor call: the actor checks the limit and
increments atomically under the user's row lock, so concurrent callers can never overshoot,
and a day's first call creates the counter row (insert-if-absent) inside that same call. The
plan comes from the Redis plan cache; no shared table is read or written. An allowed charge
appends one usage event per unit to the Redis usage buffer, named by the charge the meter
applied (user, resource, day and the counter's revision after it): a keyed retry the meter
answers from its record replies with the same revision, so its events carry the same ids and
the drain keeps one copy. A retry's reply cannot say "replayed" (the kernel answers it with the
first attempt's record), and recording only on a "charged now" answer would lose the events of
a first attempt whose reply timed out. A charge inside a caller's actor call records once that
call commits, so a rolled-back call leaves no event.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import Any

from django.db import transaction
from django.template.defaultfilters import filesizeformat
from django.utils import timezone

from apps.entitlements.plans import Kind, Plan, limit_for, resource
from apps.entitlements.services import metering as meter
from apps.entitlements.services import usage
from apps.entitlements.services.plan_cache import cached_plan
from kody.actors import CallContext
from kody.errors import AccountDeleting, KodyError


class LimitReached(KodyError):
    code = "limit_reached"
    status = 429
    message = "A plan limit was reached."


class NotMetered(KodyError):
    code = "not_metered"
    status = 400
    message = "This resource is not metered by a counter."


@dataclass(frozen=True)
class Charge:
    resource: str
    count: int
    limit: int
    plan: Plan
    resets_at: datetime | None
    charged: bool = True


def user_id_of(user: Any) -> str:
    return user if isinstance(user, str) else str(user.stable_user_id)


def utc_day(now: datetime | None = None) -> str:
    return (now or timezone.now()).astimezone(UTC).date().isoformat()


def next_utc_midnight(now: datetime | None = None) -> datetime:
    today = (now or timezone.now()).astimezone(UTC).date()
    return datetime.combine(today + timedelta(days=1), time(0), tzinfo=UTC)


def _limit_reached(
    name: str, limit: int, plan: Plan, resets_at: datetime | None, used: int
) -> LimitReached:
    res = resource(name)
    amount = str(filesizeformat(limit)) if res.kind is Kind.BYTES else f"{limit:,} {res.unit}"
    when = f"; it resets at {resets_at:%Y-%m-%d %H:%M} UTC" if resets_at else ""
    return LimitReached(
        f"Limit reached: {res.label} ({amount} on the {plan.label} plan){when}.",
        details={
            "resource": name,
            "limit": limit,
            "plan": plan.value,
            "used": used,
            "resets_at": resets_at.isoformat() if resets_at else None,
        },
    )


def _daily(name: str) -> None:
    if resource(name).kind is not Kind.DAILY:
        raise NotMetered(details={"resource": name})


def _record_now(record: Callable[[], None]) -> None:
    record()


def _record_on_commit(record: Callable[[], None]) -> None:
    # The charge is part of the caller's transaction: its events exist only if that commits.
    transaction.on_commit(record)


def _charge_identity(result: Mapping[str, Any]) -> str:
    # The counter's revision after this charge names it: a replayed reply repeats it.
    return f"{result['resource']}:{result['day']}:{result['revision']}"


def consume(
    user: Any, name: str, n: int = 1, *, now: datetime | None = None, key: str | None = None
) -> Charge:
    """Charge ``n`` units of a daily resource, or raise ``LimitReached`` without charging.

    ``key`` names this charge (e.g. ``f"execute:{request_id}"``); every call site that can be
    retried passes one. When the meter does not answer in time (``ActorCallTimeout``) the
    charge may or may not have happened: calling again with the same key charges at most
    once and answers what the first attempt did."""
    uid = user_id_of(user)
    # meter.consume bootstraps a new day in the same call.
    return _charge(
        uid, name, now, lambda day, limit: meter.consume(uid, name, day, n, limit, key), n
    )


def consume_in_call(
    context: CallContext, name: str, n: int = 1, *, now: datetime | None = None
) -> Charge:
    """``consume`` for ``context``'s user from inside one of their actor calls: the charge is
    part of that call's transaction (no queue round trip), so it commits exactly when the
    caller's writes do and needs no key. Raises ``LimitReached`` without charging."""
    return _charge(
        str(context.user_id),
        name,
        now,
        lambda day, limit: meter.consume_in_call(context, name, day, n, limit),
        n,
        record=_record_on_commit,
    )


def _charge(
    uid: str,
    name: str,
    now: datetime | None,
    charge: Callable[[str, int], Mapping[str, Any]],
    n: int = 1,
    *,
    record: Callable[[Callable[[], None]], None] = _record_now,
) -> Charge:
    """The charge both ``consume`` forms make: the user's plan limit for today, ``charge(day,
    limit)`` on the meter, and ``LimitReached`` when the meter did not allow it. ``record``
    runs the usage-event write: now, or once the caller's transaction commits."""
    _daily(name)
    plan, day = cached_plan(uid), utc_day(now)
    limit = limit_for(plan, name)
    result = charge(day, limit)
    resets_at = next_utc_midnight(now)
    if not result["allowed"]:
        raise _limit_reached(name, limit, plan, resets_at, int(result["count"]))
    # Every metered action leaves one usage event per unit (the rollups' and insights' source).
    identity = _charge_identity(result)
    record(lambda: usage.record_usage(uid, name, count=n, identity=identity))
    return Charge(name, int(result["count"]), limit, plan, resets_at)


def refund(
    user: Any, name: str, n: int = 1, *, now: datetime | None = None, key: str | None = None
) -> int:
    """Give back units charged earlier today (e.g. the guarded work failed before starting);
    ``key`` as for ``consume`` (the charge's own key is a good one)."""
    _daily(name)
    return int(meter.refund(user_id_of(user), name, utc_day(now), n, key)["count"])


def consume_inbound_delivery(
    user: Any, delivery_id: str, n: int = 1, *, now: datetime | None = None
) -> Charge:
    """Charge ``email_receives_per_day`` once per delivery id, however often it is retried."""
    name = "email_receives_per_day"
    uid, plan, day = user_id_of(user), cached_plan(user_id_of(user)), utc_day(now)
    limit = limit_for(plan, name)
    result = meter.consume_inbound_delivery(uid, delivery_id, name, day, n, limit)
    resets_at = next_utc_midnight(now)
    if not result["allowed"]:
        raise _limit_reached(name, limit, plan, resets_at, int(result["count"]))
    if result["charged"]:
        usage.record_usage(uid, name, count=n, identity=_charge_identity(result))
    return Charge(name, int(result["count"]), limit, plan, resets_at, bool(result["charged"]))


def reserve_storage_bytes(user: Any, n: int) -> Charge:
    """Reserve ``n`` payload bytes against ``storage_bytes`` (bucket estimates count too)."""
    from apps.entitlements.services.storage import bucket_estimate_total

    uid, plan = user_id_of(user), cached_plan(user_id_of(user))
    limit = limit_for(plan, "storage_bytes")
    headroom = max(0, limit - bucket_estimate_total(uid))
    try:
        result = meter.reserve_storage_bytes(uid, n, headroom)
    except AccountDeleting:
        # Only a writer that took its lease before the deletion mark gets here: the deletion
        # drains it and then purges everything, meter included, so there is nothing to meter.
        return Charge("storage_bytes", 0, limit, plan, None)
    if not result["allowed"]:
        raise _limit_reached("storage_bytes", limit, plan, None, int(result["bytes"]))
    return Charge("storage_bytes", int(result["bytes"]), limit, plan, None)


def storage_limit_reached(user: Any, used: int) -> LimitReached:
    """The coded error of a refused storage reservation made elsewhere (inside another
    actor's call), the same as ``reserve_storage_bytes`` raises."""
    plan = cached_plan(user_id_of(user))
    return _limit_reached("storage_bytes", limit_for(plan, "storage_bytes"), plan, None, used)


def reserve_storage_bytes_in_call(context: CallContext, n: int, *, force: bool = False) -> int:
    """``reserve_storage_bytes`` from inside one of the user's own actor calls: the meter's
    row changes in that call's transaction, so the bytes commit or roll back with the rows
    that hold them (a refused write raises ``LimitReached`` and the caller's transaction
    stores nothing). A negative ``n`` gives bytes back. ``force`` charges past the limit:
    for rows the platform must keep whatever the meter says (a finished run's minimal record,
    the scheduler's own fields), which reconciliation would count anyway. Returns the
    meter's bytes after."""
    plan = cached_plan(str(context.user_id))
    limit = limit_for(plan, "storage_bytes")
    if n == 0:
        return int(meter.read_storage_bytes_in_call(context)["bytes"])
    # The meter takes the user's bucket estimates off the limit in the same statement.
    headroom = FORCED if force or n < 0 else limit
    result = meter.reserve_storage_bytes_in_call(context, n, headroom)
    if not result["allowed"]:
        raise _limit_reached("storage_bytes", limit, plan, None, int(result["bytes"]))
    return int(result["bytes"])


# A limit no meter reaches: a forced charge or a release always applies.
FORCED = 2**62


def release_storage_bytes(user: Any, n: int) -> None:
    """Give back ``n`` bytes a delete freed (never below zero; reconciliation fixes drift)."""
    if n > 0:
        with contextlib.suppress(AccountDeleting):  # the purge drops the meter anyway
            meter.reserve_storage_bytes(user_id_of(user), -n, 0)


def assert_within(user: Any, name: str, n: int = 1, *, now: datetime | None = None) -> None:
    """Raise ``LimitReached`` when ``n`` more units would pass the plan limit; charges nothing."""
    uid, plan = user_id_of(user), cached_plan(user_id_of(user))
    limit = limit_for(plan, name)
    used = current_use(uid, name, now=now)
    if used is not None and used + n > limit:
        resets_at = next_utc_midnight(now) if resource(name).kind is Kind.DAILY else None
        raise _limit_reached(name, limit, plan, resets_at, used)


def current_use(uid: str, name: str, *, now: datetime | None = None) -> int | None:
    from apps.entitlements.services import counters

    kind = resource(name).kind
    if kind is Kind.DAILY:
        return meter.read_daily(uid, utc_day(now)).get(name, 0)
    return counters.count(uid, name)
