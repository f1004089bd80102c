"""Job schedules and the one function that says when a job runs next.

A schedule is stored as ``jobs.schedule_json`` with the job's IANA ``timezone`` beside it:

* ``{"type": "cron", "expression": "30 2 * * *"}`` — five fields (minute hour day-of-month
  month day-of-week), read as wall-clock time in the job's time zone;
* ``{"type": "interval", "everySeconds": 3600, "anchorAt": "<UTC ISO>"}`` — every N seconds
  of elapsed time from the anchor (the zone does not matter: an interval is not wall time);
* ``{"type": "once", "runAt": "<ISO>"}`` — one run; a ``runAt`` without an offset is wall
  time in the job's zone.

Daylight-saving rules (design note). Cron matches wall-clock minutes, and a wall-clock
minute can be missing (spring forward) or happen twice (fall back):

* a missing minute that the expression names with a fixed hour runs once, shifted by the gap
  (02:30 on a spring-forward day runs at 03:30 new time); with ``*`` in the
  hour field the minute is simply skipped, because the next hour's minutes follow anyway;
* a repeated minute runs once, on its first occurrence, unless the hour field is ``*``: a job
  "every 15 minutes" keeps running through both copies of the repeated hour.

``next_run_at`` is pure: no database, no clock. It returns an aware UTC datetime strictly after
``after``, or ``None`` when the schedule has no further run.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from kody.errors import InvalidInput

MIN_INTERVAL_SECONDS = 60
MAX_INTERVAL_SECONDS = 366 * 86400
# Long enough for "29 February that is also a Monday" (28 years), short enough to stay bounded.
CRON_SEARCH_DAYS = 366 * 29

_MONTHS = {m: i for i, m in enumerate("jan feb mar apr may jun jul aug sep oct nov dec".split(), 1)}
_DAYS = {d: i for i, d in enumerate("sun mon tue wed thu fri sat".split())}


class InvalidSchedule(InvalidInput):
    code = "invalid_schedule"
    message = "The schedule is not valid."


@dataclass(frozen=True)
class Cron:
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # 0 = Sunday
    any_hour: bool
    any_day: bool
    any_weekday: bool

    def matches_day(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        dom = day.day in self.days
        dow = (day.isoweekday() % 7) in self.weekdays
        if self.any_day and self.any_weekday:
            return True
        if self.any_day:
            return dow
        if self.any_weekday:
            return dom
        return dom or dow  # both restricted: either matches (classic cron)


def _field(text: str, low: int, high: int, names: dict[str, int] | None = None) -> set[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            step = _number(step_text, 1, high - low + 1 if high > low else 1, None)
        if part == "*":
            start, end = low, high
        elif "-" in part:
            first, last = part.split("-", 1)
            start, end = _number(first, low, high, names), _number(last, low, high, names)
            if start > end:
                raise ValueError(f"range {part} runs backwards")
        else:
            start = _number(part, low, high, names)
            end = high if step > 1 else start
        values.update(range(start, end + 1, step))
    return values


def _number(text: str, low: int, high: int, names: dict[str, int] | None) -> int:
    key = text.strip().lower()
    if names and key in names:
        return names[key]
    if not key.isdigit():
        raise ValueError(f"{text!r} is not a number")
    value = int(key)
    if not low <= value <= high:
        raise ValueError(f"{value} is outside {low}-{high}")
    return value


def parse_cron(expression: str) -> Cron:
    fields = expression.split()
    if len(fields) != 5:
        raise InvalidSchedule(
            "A cron expression has five fields: minute hour day-of-month month day-of-week.",
            details={"expression": expression},
        )
    minute, hour, dom, month, dow = fields
    try:
        return Cron(
            minutes=tuple(sorted(_field(minute, 0, 59))),
            hours=tuple(sorted(_field(hour, 0, 23))),
            days=frozenset(_field(dom, 1, 31)),
            months=frozenset(_field(month, 1, 12, _MONTHS)),
            weekdays=frozenset(d % 7 for d in _field(dow, 0, 7, _DAYS)),
            any_hour=hour == "*",
            any_day=dom == "*",
            any_weekday=dow == "*",
        )
    except ValueError as exc:
        raise InvalidSchedule(
            f"Bad cron expression: {exc}.", details={"expression": expression}
        ) from None


def zone(name: str) -> ZoneInfo:
    if name not in _zones():
        raise InvalidSchedule("Unknown IANA time zone.", details={"timezone": name})
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidSchedule("Unknown IANA time zone.", details={"timezone": name}) from None


_ZONES: frozenset[str] | None = None


def _zones() -> frozenset[str]:
    global _ZONES
    if _ZONES is None:
        _ZONES = frozenset(available_timezones())
    return _ZONES


def _wall_instants(day: date, hour: int, minute: int, tz: ZoneInfo, cron: Cron) -> list[datetime]:
    """The UTC instants at which wall time ``day hour:minute`` in ``tz`` counts as a match."""
    naive = datetime.combine(day, time(hour, minute))
    first = naive.replace(tzinfo=tz, fold=0)
    second = naive.replace(tzinfo=tz, fold=1)
    first_utc, second_utc = first.astimezone(UTC), second.astimezone(UTC)
    if first_utc == second_utc:
        return [first_utc]
    exists = first_utc.astimezone(tz).replace(tzinfo=None) == naive
    if not exists:  # a gap: fold=0 reads it with the old offset, i.e. shifted past the jump
        return [] if cron.any_hour else [first_utc]
    return [first_utc, second_utc] if cron.any_hour else [first_utc]


def next_cron(cron: Cron, tz: ZoneInfo, after: datetime) -> datetime | None:
    start = after.astimezone(tz).date() - timedelta(days=1)
    for offset in range(CRON_SEARCH_DAYS):
        day = start + timedelta(days=offset)
        if not cron.matches_day(day):
            continue
        candidates = sorted(
            instant
            for hour in cron.hours
            for minute in cron.minutes
            for instant in _wall_instants(day, hour, minute, tz, cron)
            if instant > after
        )
        if candidates:
            return candidates[0]
    return None


def _parse_instant(text: Any, tz: ZoneInfo, field: str) -> datetime:
    if not isinstance(text, str):
        raise InvalidSchedule(f"{field} must be an ISO 8601 date-time.", details={field: text})
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidSchedule(
            f"{field} must be an ISO 8601 date-time.", details={field: text}
        ) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=tz)
    return value.astimezone(UTC)


def next_run_at(schedule: dict[str, Any], timezone: str, after: datetime) -> datetime | None:
    """The first run strictly after ``after`` (aware), or ``None`` when there is none."""
    tz = zone(timezone)
    kind = schedule.get("type")
    if kind == "cron":
        return next_cron(parse_cron(str(schedule.get("expression", ""))), tz, after)
    if kind == "interval":
        every = _interval_seconds(schedule)
        anchor = _parse_instant(schedule.get("anchorAt"), tz, "anchorAt")
        if after < anchor:
            return anchor
        steps = int((after - anchor).total_seconds() // every) + 1
        return anchor + timedelta(seconds=steps * every)
    if kind == "once":
        run_at = _parse_instant(schedule.get("runAt"), tz, "runAt")
        return run_at if run_at > after else None
    raise InvalidSchedule("A schedule's type is cron, interval or once.", details={"type": kind})


def _interval_seconds(schedule: dict[str, Any]) -> int:
    every = schedule.get("everySeconds")
    if not isinstance(every, int) or isinstance(every, bool):
        raise InvalidSchedule("everySeconds must be a whole number of seconds.")
    if not MIN_INTERVAL_SECONDS <= every <= MAX_INTERVAL_SECONDS:
        raise InvalidSchedule(
            f"everySeconds must be between {MIN_INTERVAL_SECONDS} and {MAX_INTERVAL_SECONDS}.",
            details={"everySeconds": every},
        )
    return every


def normalize(schedule: Any, timezone: str, now: datetime) -> tuple[dict[str, Any], datetime]:
    """Validate a schedule from a caller and return its stored form and first run.

    Raises ``InvalidSchedule`` for anything that cannot run at least once after ``now``.
    """
    if not isinstance(schedule, dict):
        raise InvalidSchedule("A schedule is an object with a type.")
    tz = zone(timezone)
    kind = schedule.get("type")
    if kind == "cron":
        expression = " ".join(str(schedule.get("expression", "")).split())
        stored: dict[str, Any] = {"type": "cron", "expression": expression}
    elif kind == "interval":
        anchor = schedule.get("anchorAt")
        anchor_at = _parse_instant(anchor, tz, "anchorAt") if anchor is not None else now
        stored = {
            "type": "interval",
            "everySeconds": _interval_seconds(schedule),
            "anchorAt": anchor_at.isoformat(),
        }
    elif kind == "once":
        stored = {"type": "once", "runAt": _parse_instant(schedule.get("runAt"), tz, "runAt")}
        stored["runAt"] = stored["runAt"].isoformat()
    else:
        raise InvalidSchedule(
            "A schedule's type is cron, interval or once.", details={"type": kind}
        )
    first = next_run_at(stored, timezone, now - timedelta(microseconds=1))
    if first is None:
        raise InvalidSchedule("The schedule never runs after now.", details={"schedule": stored})
    return stored, first


def describe(schedule: dict[str, Any]) -> str:
    kind = schedule.get("type")
    if kind == "cron":
        return f"cron {schedule.get('expression')}"
    if kind == "interval":
        return f"every {schedule.get('everySeconds')} s"
    return f"once at {schedule.get('runAt')}"


def upcoming(
    schedule: dict[str, Any], timezone: str, after: datetime, count: int
) -> Iterable[datetime]:
    at: datetime | None = after
    for _ in range(count):
        at = next_run_at(schedule, timezone, at) if at is not None else None
        if at is None:
            return
        yield at
