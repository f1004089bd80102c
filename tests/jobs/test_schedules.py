"""next_run_at: cron (five fields), interval and once, in IANA zones, DST-correct."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from apps.jobs.schedules import InvalidSchedule, next_run_at, normalize, parse_cron, upcoming

ZONES = ["UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"]
instants = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2040, 1, 1), timezones=st.just(UTC)
)
minute_fields = st.sampled_from(["*", "0", "30", "*/15", "5,35", "10-20/5"])
hour_fields = st.sampled_from(["*", "2", "1", "0-23/6", "9-17"])
day_fields = st.sampled_from(["*", "1", "15", "31", "1-7"])
month_fields = st.sampled_from(["*", "2", "jan-mar", "*/4"])
dow_fields = st.sampled_from(["*", "1", "mon-fri", "0", "7"])
crons = st.builds(
    lambda *f: " ".join(f), minute_fields, hour_fields, day_fields, month_fields, dow_fields
)


def cron(expression: str) -> dict:
    return {"type": "cron", "expression": expression}


@settings(max_examples=60, deadline=None)
@given(crons, st.sampled_from(ZONES), instants)
def test_a_cron_run_is_after_now_and_on_a_matching_wall_minute(expression, zone, after):
    at = next_run_at(cron(expression), zone, after)
    parsed = parse_cron(expression)
    if at is None:  # only a date that never exists (31 February) may have no run
        longest = {2: 29, 4: 30, 6: 30, 9: 30, 11: 30}
        assert parsed.any_weekday and min(parsed.days) > max(
            longest.get(month, 31) for month in parsed.months
        )
        return
    assert at > after
    local = at.astimezone(ZoneInfo(zone))
    assert parsed.matches_day(local.date()) and local.second == 0
    on_named_minute = local.hour in parsed.hours and local.minute in parsed.minutes
    # Only a spring-forward gap just before may move a run off its named wall minute.
    just_after_a_jump = (at - timedelta(hours=2)).astimezone(ZoneInfo(zone)).utcoffset() != (
        local.utcoffset()
    )
    assert on_named_minute or just_after_a_jump


@settings(max_examples=60, deadline=None)
@given(crons, st.sampled_from(ZONES), instants)
def test_no_cron_run_is_skipped_between_two_answers(expression, zone, after):
    first = next_run_at(cron(expression), zone, after)
    if first is None:
        return
    second = next_run_at(cron(expression), zone, first)
    assert second > first
    # Asking from any instant in between gives the second run again.
    middle = first + (second - first) / 2
    assert next_run_at(cron(expression), zone, middle) == second


@settings(max_examples=100, deadline=None)
@given(st.integers(60, 86400 * 3), instants, instants)
def test_an_interval_lands_on_its_grid(every, anchor, after):
    schedule = {"type": "interval", "everySeconds": every, "anchorAt": anchor.isoformat()}
    at = next_run_at(schedule, "Europe/Berlin", after)
    assert at > after and at >= anchor
    assert (at - anchor).total_seconds() % every == 0
    assert at - after <= timedelta(seconds=every) or after < anchor


@given(instants, instants)
def test_once_runs_once(run_at, after):
    schedule = {"type": "once", "runAt": run_at.isoformat()}
    at = next_run_at(schedule, "UTC", after)
    assert at == (run_at if run_at > after else None)


def test_a_daily_0230_job_runs_once_on_a_spring_forward_day():
    day_before = datetime(2031, 3, 8, 12, tzinfo=UTC)  # US DST starts 2031-03-09
    runs = list(upcoming(cron("30 2 * * *"), "America/New_York", day_before, 3))
    local = [r.astimezone(ZoneInfo("America/New_York")) for r in runs]
    assert [x.date().day for x in local] == [9, 10, 11]
    assert (local[0].hour, local[0].minute) == (3, 30)  # 02:30 does not exist that day
    assert [(x.hour, x.minute) for x in local[1:]] == [(2, 30), (2, 30)]


def test_a_daily_0130_job_runs_once_on_a_fall_back_day():
    runs = list(
        upcoming(cron("30 1 * * *"), "America/New_York", datetime(2031, 11, 1, 12, tzinfo=UTC), 2)
    )
    assert runs[1] - runs[0] == timedelta(hours=25)  # once on the 25-hour day, then the next


def test_every_15_minutes_keeps_running_through_the_repeated_hour():
    start = datetime(2031, 11, 2, 4, 50, tzinfo=UTC)  # 00:50 EDT, an hour before fall-back
    runs = list(upcoming(cron("*/15 * * * *"), "America/New_York", start, 12))
    gaps = {b - a for a, b in zip(runs, runs[1:], strict=False)}
    assert gaps == {timedelta(minutes=15)}


def test_day_of_month_and_weekday_both_set_match_either():
    runs = list(upcoming(cron("0 0 13 * 5"), "UTC", datetime(2031, 6, 1, tzinfo=UTC), 6))
    assert all(r.day == 13 or r.isoweekday() == 5 for r in runs)
    assert any(r.day == 13 and r.isoweekday() != 5 for r in runs) or len(runs) == 6


@pytest.mark.parametrize(
    ("schedule", "zone"),
    [
        (cron("* * * *"), "UTC"),
        (cron("61 * * * *"), "UTC"),
        (cron("0 0 30 2 *"), "UTC"),
        (cron("5-1 * * * *"), "UTC"),
        (cron("* * * * *"), "Mars/Olympus"),
        ({"type": "interval", "everySeconds": 5}, "UTC"),
        ({"type": "interval", "everySeconds": "60"}, "UTC"),
        ({"type": "once", "runAt": "2020-01-01T00:00:00Z"}, "UTC"),
        ({"type": "once", "runAt": "tomorrow"}, "UTC"),
        ({"type": "weekly"}, "UTC"),
    ],
)
def test_a_bad_schedule_is_refused_with_a_coded_error(schedule, zone):
    with pytest.raises(InvalidSchedule) as error:
        normalize(schedule, zone, datetime(2031, 1, 1, tzinfo=UTC))
    assert error.value.status == 422 or error.value.status == 400
    assert error.value.code == "invalid_schedule"


def test_a_naive_once_time_is_wall_time_in_the_jobs_zone():
    stored, first = normalize(
        {"type": "once", "runAt": "2031-07-01T09:00:00"},
        "Europe/Berlin",
        datetime(2031, 1, 1, tzinfo=UTC),
    )
    assert first == datetime(2031, 7, 1, 7, 0, tzinfo=UTC)
    assert stored["runAt"] == "2031-07-01T07:00:00+00:00"
