"""Dates read as dates: one filter for every page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from django.template import Context, Template

from kody.templatetags.kody_dates import when


def test_iso_strings_and_datetimes_read_the_same() -> None:
    moment = datetime(2026, 12, 4, 15, 21, 7, 123456, tzinfo=UTC)
    assert when("2026-12-04T15:21:07.123456+00:00") == "4 Dec 2026, 15:21 UTC"
    assert when("2026-12-04T15:21:07Z") == "4 Dec 2026, 15:21 UTC"
    assert when(moment) == "4 Dec 2026, 15:21 UTC"
    assert when(moment.astimezone(timezone(timedelta(hours=2)))) == "4 Dec 2026, 15:21 UTC"


def test_other_values_pass_through() -> None:
    assert when("not a date") == "not a date"
    assert when(None) == ""


def test_the_mail_list_no_longer_glues_date_and_time() -> None:
    rendered = Template("{% load kody_dates %}{{ at|when }}").render(
        Context({"at": "2026-12-04T15:21:00+00:00"})
    )
    assert rendered == "4 Dec 2026, 15:21 UTC" and "0415:21" not in rendered


def test_the_active_time_zone_is_the_one_shown() -> None:
    from zoneinfo import ZoneInfo

    from django.utils import timezone as dj_timezone

    moment = datetime(2026, 12, 4, 15, 21, tzinfo=UTC)
    summer = datetime(2026, 7, 4, 15, 21, tzinfo=UTC)
    with dj_timezone.override(ZoneInfo("Europe/Paris")):
        assert when(moment) == "4 Dec 2026, 16:21 CET"
        assert when(summer) == "4 Jul 2026, 17:21 CEST"
        assert when("2026-12-04T23:30:00Z") == "5 Dec 2026, 00:30 CET"  # the date turns too
    with dj_timezone.override(ZoneInfo("Asia/Kolkata")):
        assert when(moment) == "4 Dec 2026, 20:51 IST"
    with dj_timezone.override(ZoneInfo("America/Sao_Paulo")):
        # No letters for this zone in the tz database: its offset instead.
        assert when(moment) == "4 Dec 2026, 12:21 UTC-03:00"
    assert when(moment) == "4 Dec 2026, 15:21 UTC"
