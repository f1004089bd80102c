from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

import psycopg
import pytest
from django.core.management import CommandError, call_command
from django.db import connection, transaction

from kody.lanes import Cadence, LaneRun, is_due, registry, run_lane
from kody.lanes.models import LaneCursor
from kody.lanes.tasks import backoff_seconds, dispatch
from tests.kernel.factories import LaneCursorFactory, LaneRunRecordFactory


def at(hour: int, minute: int) -> datetime:
    return datetime(2026, 11, 29, hour, minute, tzinfo=UTC)


@pytest.mark.parametrize(
    ("cadence", "when", "due"),
    [
        (Cadence.EVERY_TICK, at(13, 35), True),
        (Cadence.HOURLY, at(13, 0), True),
        (Cadence.HOURLY, at(13, 4), True),
        (Cadence.HOURLY, at(13, 5), False),
        (Cadence.HOURLY, at(13, 55), False),
        (Cadence.DAILY, at(3, 0), True),
        (Cadence.DAILY, at(3, 4), True),
        (Cadence.DAILY, at(3, 5), False),
        (Cadence.DAILY, at(2, 59), False),
        (Cadence.DAILY, at(4, 0), False),
        (Cadence.RETIRED, at(3, 0), False),
    ],
)
def test_due_at_the_cadence_edges(cadence, when, due):
    assert is_due(cadence, when) is due


def test_backoff_is_bounded(settings):
    settings.KODY_LANE_RETRY_BASE_SECONDS = 2
    assert [backoff_seconds(n) for n in range(3)] == [2, 4, 8]
    assert backoff_seconds(20) == 60


def test_kernel_lanes_are_registered():
    names = {lane.name for lane in registry.all_lanes()}
    assert {"actor_alarms", "kv_expired"} <= names


def test_a_run_logs_one_metrics_line(lanes, caplog, db):
    def two_batches(run: LaneRun) -> None:
        run.record(3)
        run.record(2)

    lanes("test_metrics", two_batches, batch_size=3)
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run_lane("test_metrics")
    [line] = [r.getMessage() for r in caplog.records if "lane=test_metrics" in r.getMessage()]
    assert line.startswith(
        "lane=test_metrics status=ok attempt=1 batches=2 items=5 "
        "budget_exhausted=false duration_ms="
    )


def test_budget_exhaustion_is_reported(lanes, caplog, db):
    def forever(run: LaneRun) -> None:
        while not run.out_of_time():
            run.record(1)

    lanes("test_budget", forever, budget_seconds=0.01)
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run = run_lane("test_budget")
    assert run is not None and run.budget_exhausted
    assert "budget_exhausted=true" in caplog.text


def test_retired_and_unknown_lanes_are_no_ops(lanes, caplog, db):
    lanes("test_retired", None, cadence=Cadence.RETIRED)
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        assert run_lane("test_retired").lane.retired
        assert run_lane("no_such_lane") is None
    assert "lane=test_retired status=retired" in caplog.text
    assert "lane=no_such_lane status=unknown" in caplog.text
    assert "test_retired" not in [
        lane.name for lane in registry.due_lanes(at(3, 0)) if not lane.retired
    ]


def test_the_keyset_cursor_is_stored_in_public(lanes, db):
    def page(run: LaneRun) -> None:
        run.save_cursor(str(int(run.cursor or "0") + 10))

    lanes("test_cursor", page)
    run_lane("test_cursor")
    run_lane("test_cursor")
    assert LaneCursor.objects.get(lane="test_cursor").position == "20"


def test_run_lane_command(lanes, capsys, db):
    lanes("test_command", lambda run: run.record(7))
    call_command("run_lane", "test_command")
    assert "lane=test_command status=ok" in capsys.readouterr().out
    with pytest.raises(CommandError):
        call_command("run_lane", "no_such_lane")
    call_command("run_lane", "--list")
    assert "actor_alarms" in capsys.readouterr().out


def _wait(predicate, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


@pytest.mark.queue
@pytest.mark.django_db(transaction=True)
def test_a_failing_lane_does_not_stop_its_sibling(lanes, celery_worker, caplog):
    done = threading.Event()

    def broken(run: LaneRun) -> None:
        raise RuntimeError("lane bug")

    lanes("test_broken", broken)
    lanes("test_sibling", lambda run: done.set())
    lanes("test_hourly_only", lambda run: pytest.fail("not due at 13:35"), cadence=Cadence.HOURLY)
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        dispatch.delay(at(13, 35).isoformat())
        assert done.wait(timeout=20)
        assert _wait(lambda: "lane=test_broken status=error" in caplog.text)
    assert "test_hourly_only" not in caplog.text


@pytest.mark.queue
@pytest.mark.django_db(transaction=True)
def test_lock_contention_retries_three_times_then_stops(lanes, celery_worker, caplog, settings):
    settings.KODY_LANE_RETRY_BASE_SECONDS = 0
    LaneCursorFactory(lane="test_lock_target")
    attempts: list[int] = []

    def contended(run: LaneRun) -> None:
        attempts.append(run.attempt)
        with transaction.atomic():
            LaneCursor.objects.select_for_update(nowait=True).get(lane="test_lock_target")

    lanes("test_contended", contended)
    # A connection of its own, outside the process's pool (whose connections are autocommit):
    # its transaction holds the row lock until the rollback below.
    holder = psycopg.connect(**connection.get_connection_params(), autocommit=False)
    try:
        holder.execute("SELECT 1 FROM kody_lane_cursors WHERE lane = 'test_lock_target' FOR UPDATE")
        with caplog.at_level(logging.INFO, logger="kody.lanes"):
            from kody.lanes.tasks import run as run_task

            run_task.delay("test_contended")
            assert _wait(lambda: "gave up after 3" in caplog.text)
        time.sleep(0.3)
        assert attempts == [1, 2, 3, 4]
        assert caplog.text.count("status=lock_contention") == 4
    finally:
        holder.rollback()
        holder.close()


def _dispatched(enqueued: list[str], when: datetime) -> list[str]:
    enqueued.clear()
    dispatch(when.isoformat())
    return [name for name in enqueued if name.startswith("test_")]


def test_a_daily_lane_that_missed_its_window_runs_on_the_next_tick(lanes, enqueued, db):
    from datetime import timedelta

    lanes("test_daily", lambda run: None, cadence=Cadence.DAILY)
    LaneRunRecordFactory(lane="test_daily", last_started_at=at(3, 0) - timedelta(days=1))
    # Beat was down at 03:00: the 03:10 tick catches up, once.
    assert _dispatched(enqueued, at(3, 10)) == ["test_daily"]
    assert _dispatched(enqueued, at(3, 15)) == []  # still queued: not enqueued twice


def test_an_hourly_lane_that_ran_this_hour_is_not_caught_up(lanes, enqueued, db):
    from kody.lanes.models import LaneRunRecord

    lanes("test_hourly", lambda run: None, cadence=Cadence.HOURLY)
    LaneRunRecordFactory(lane="test_hourly", last_started_at=at(13, 1))
    assert _dispatched(enqueued, at(13, 40)) == []
    LaneRunRecord.objects.filter(lane="test_hourly").update(last_started_at=at(12, 0))
    assert _dispatched(enqueued, at(13, 40)) == ["test_hourly"]


def test_a_lane_that_never_ran_waits_for_its_window(lanes, enqueued, db):
    lanes("test_new_daily", lambda run: None, cadence=Cadence.DAILY)
    assert _dispatched(enqueued, at(3, 10)) == []
    assert _dispatched(enqueued, at(3, 0)) == ["test_new_daily"]


def test_a_window_is_enqueued_once_when_beat_ticks_twice_in_it(lanes, enqueued, db):
    lanes("test_hourly_twice", lambda run: None, cadence=Cadence.HOURLY)
    lanes("test_every_tick", lambda run: None)
    assert sorted(_dispatched(enqueued, at(13, 0))) == ["test_every_tick", "test_hourly_twice"]
    assert _dispatched(enqueued, at(13, 4)) == ["test_every_tick"]
    assert sorted(_dispatched(enqueued, at(14, 0))) == ["test_every_tick", "test_hourly_twice"]
