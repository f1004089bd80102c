"""Operators pause and resume lanes in /admin/ without a deploy (ADR 0010)."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.utils import display_for_value
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from kody.lanes import Cadence, LaneRun, control, registry
from kody.lanes.models import LaneControl, LaneRunRecord
from kody.lanes.tasks import dispatch, run
from tests.clock import FROZEN_AT
from tests.kernel.factories import LaneControlFactory, LaneRunRecordFactory

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:kody_lanecontrol_changelist"


def _noop(run: LaneRun) -> None:
    return None


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


def act(client: Client, action: str, *names: str) -> None:
    response = client.post(
        reverse(CHANGELIST),
        {"action": action, "_selected_action": list(names), "index": 0},
    )
    assert response.status_code == 302, response.content[:500]


def tick(enqueued: list[str]) -> list[str]:
    """One beat tick at the (fake) current time: the test lanes the dispatcher enqueued."""
    enqueued.clear()
    dispatch()
    return sorted(name for name in enqueued if name.startswith("test_"))


def test_pausing_in_admin_stops_the_next_run_and_resuming_runs_it_again(
    frozen_clock, lanes, enqueued, operator, operator_client, caplog
):
    lanes("test_noisy", lambda run: None)
    lanes("test_quiet", lambda run: None)
    frozen_clock.move_to(FROZEN_AT)
    assert tick(enqueued) == ["test_noisy", "test_quiet"]

    act(operator_client, "pause_lanes", "test_noisy")
    row = LaneControl.objects.get(name="test_noisy")
    assert (
        row.paused
        and row.paused_by_user_id == operator.stable_user_id
        and row.paused_at == FROZEN_AT
    )

    frozen_clock.shift(timedelta(minutes=5))
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        assert tick(enqueued) == ["test_quiet"]
    assert "lane=test_noisy status=paused" in caplog.text

    act(operator_client, "resume_lanes", "test_noisy")
    assert not LaneControl.objects.get(name="test_noisy").paused
    frozen_clock.shift(timedelta(minutes=5))
    assert tick(enqueued) == ["test_noisy", "test_quiet"]


def test_a_run_queued_before_the_pause_is_skipped_but_run_lane_still_runs_it(
    lanes, operator_client, caplog, capsys
):
    ran: list[int] = []
    lanes("test_paused", lambda run: ran.append(1))
    control.sync()
    act(operator_client, "pause_lanes", "test_paused")

    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run.apply(args=["test_paused"])
    assert ran == [] and "lane=test_paused status=paused" in caplog.text
    assert not LaneRunRecord.objects.filter(lane="test_paused").exists()

    call_command("run_lane", "test_paused")
    assert ran == [1] and "lane=test_paused status=ok" in capsys.readouterr().out


def test_a_lane_resumed_after_missing_its_hourly_window_catches_up_on_the_next_tick(
    lanes, enqueued, operator_client
):
    lanes("test_hourly", lambda run: None, cadence=Cadence.HOURLY)
    LaneRunRecordFactory(lane="test_hourly", last_started_at=at(12, 0))
    control.sync()
    act(operator_client, "pause_lanes", "test_hourly")
    enqueued.clear()
    dispatch(at(13, 0).isoformat())
    assert "test_hourly" not in enqueued  # paused through its 13:00 window

    act(operator_client, "resume_lanes", "test_hourly")
    enqueued.clear()
    dispatch(at(13, 20).isoformat())
    assert "test_hourly" in enqueued


def test_the_change_form_pauses_with_a_reason_and_unpausing_clears_it(
    lanes, operator, operator_client
):
    lanes("test_form", lambda run: None)
    control.sync()
    url = reverse("admin:kody_lanecontrol_change", args=["test_form"])
    response = operator_client.post(url, {"paused": "on", "pause_reason": "floods the log"})
    assert response.status_code == 302
    row = LaneControl.objects.get(name="test_form")
    assert (row.paused, row.paused_by_user_id, row.pause_reason) == (
        True,
        operator.stable_user_id,
        "floods the log",
    )
    # The admin names the operator by their current username, looked up by stable id.
    lane_admin = admin.site._registry[LaneControl]
    assert lane_admin.paused_by(row) == operator.username

    operator_client.post(url, {"pause_reason": "floods the log"})
    row.refresh_from_db()
    assert (row.paused, row.paused_at, row.paused_by_user_id, row.pause_reason) == (
        False,
        None,
        None,
        "",
    )


def test_the_health_report_says_which_lanes_are_paused(lanes, operator_client):
    lanes("test_health_paused", lambda run: None)
    control.sync()
    act(operator_client, "pause_lanes", "test_health_paused")
    report = operator_client.get(reverse("admin:kody_health_json")).json()
    rows = {row["name"]: row for row in report["lanes"]["lanes"]}
    assert rows["test_health_paused"]["paused"] is True
    assert rows["actor_alarms"]["paused"] is False
    page = operator_client.get(reverse("admin:kody_health")).content.decode()
    assert "every_tick (paused)" in page


def test_people_who_are_not_staff_cannot_see_or_pause_lanes(lanes, owner_client):
    lanes("test_guarded", lambda run: None)
    control.sync()
    assert owner_client.get(reverse(CHANGELIST)).status_code == 302  # to the admin login
    act(owner_client, "pause_lanes", "test_guarded")
    assert not LaneControl.objects.get(name="test_guarded").paused
    assert control.paused_names() == set()


def test_the_lane_list_shows_cadence_state_last_run_and_next_window(
    frozen_clock, lanes, operator_client
):
    frozen_clock.move_to(FROZEN_AT + timedelta(minutes=7))
    lanes("test_listed", lambda run: None, cadence=Cadence.HOURLY)
    LaneRunRecordFactory(
        lane="test_listed",
        last_started_at=FROZEN_AT,
        last_finished_at=FROZEN_AT,
        last_status="ok",
        last_items=7,
        last_duration_ms=42,
    )
    response = operator_client.get(reverse(CHANGELIST))
    assert response.status_code == 200
    page = response.content.decode()
    # Every declared lane gets its row when the list opens, kernel lanes included.
    assert {lane.name for lane in registry.all_lanes()} <= set(
        LaneControl.objects.values_list("name", flat=True)
    )
    row = page[page.index(">test_listed<") :].split("</tr>", 1)[0]
    assert "hourly" in row and "enabled" in row and "ok, 7 items, 42 ms" in row
    assert display_for_value(FROZEN_AT, "") in row  # finished
    assert display_for_value(FROZEN_AT + timedelta(hours=1), "") in row  # next window: 13:00
    assert "never ran" in page  # a lane with no kody_lane_runs row yet


def test_a_lane_that_code_no_longer_declares_shows_as_retired_and_never_runs(
    lanes, enqueued, operator_client, caplog
):
    LaneControlFactory(name="test_gone")
    lanes("test_retired", None, cadence=Cadence.RETIRED)
    page = operator_client.get(reverse(CHANGELIST)).content.decode()
    for name in ("test_gone", "test_retired"):
        row = page[page.index(f">{name}<") :].split("</tr>", 1)[0]
        assert "retired" in row and "never (retired)" in row
    act(operator_client, "resume_lanes", "test_gone")  # nothing to resume into running

    for minute in range(0, 60, 5):
        enqueued.clear()
        dispatch(at(3, minute).isoformat())
        assert not {"test_gone", "test_retired"} & set(enqueued)
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run.apply(args=["test_gone"])
    assert "lane=test_gone status=unknown" in caplog.text
    assert not LaneRunRecord.objects.filter(lane__in=["test_gone", "test_retired"]).exists()


@pytest.mark.parametrize(
    ("cadence", "now", "last_started", "last_dispatched", "expected"),
    [
        (Cadence.EVERY_TICK, at(13, 2), None, None, at(13, 5)),
        (Cadence.EVERY_TICK, at(13, 5), None, None, at(13, 10)),
        (Cadence.HOURLY, at(13, 7), None, None, at(14, 0)),
        (Cadence.HOURLY, at(12, 58), None, None, at(13, 0)),
        (Cadence.HOURLY, at(13, 1), None, None, at(14, 0)),  # 13:05 is outside the window
        (Cadence.HOURLY, at(13, 20), at(12, 0), None, at(13, 25)),  # missed 13:00: catch up
        (Cadence.HOURLY, at(13, 20), at(12, 0), at(13, 10), at(14, 0)),  # catch-up queued
        (Cadence.DAILY, at(13, 0), at(3, 0), at(3, 0), at(3, 0) + timedelta(days=1)),
        (Cadence.DAILY, at(2, 58), None, None, at(3, 0)),
        (Cadence.RETIRED, at(2, 58), None, None, None),
    ],
)
def test_next_window_follows_the_dispatchers_rules(
    cadence, now, last_started, last_dispatched, expected
):
    item = registry.Lane("test_next", cadence, None if cadence is Cadence.RETIRED else _noop)
    found = control.next_window(
        item, now, last_started=last_started, last_dispatched=last_dispatched
    )
    assert found == expected


def test_next_window_agrees_with_the_dispatcher_tick_by_tick(lanes, enqueued):
    lanes("test_agree", lambda run: None, cadence=Cadence.DAILY)
    LaneRunRecordFactory(lane="test_agree", last_started_at=at(3, 0) - timedelta(days=1))
    now = at(1, 3)
    predicted = control.next_window(
        registry.get("test_agree"), now, last_started=at(3, 0) - timedelta(days=1)
    )
    when = control.next_tick(now)
    while True:
        enqueued.clear()
        dispatch(when.isoformat())
        if "test_agree" in enqueued:
            break
        when += control.TICK
    assert predicted == when == at(3, 0)
