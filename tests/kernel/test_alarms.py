from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.utils import timezone

from apps.entitlements.actor import UserMeter
from kody.actors import transport
from kody.lanes import run_lane
from kody.userschema.models import UserSchema
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


def alarm_at(user: str):  # type: ignore[no-untyped-def]
    return UserSchema.objects.get(user_id=user).alarm_at


def alarm_runs(user: str) -> int:
    today = timezone.now().date().isoformat()
    return UserMeter.call(user, "read", resource="email_sends_per_day", day=today)["count"]


def test_setting_an_alarm_never_postpones_an_earlier_one(owner_id, inline_actors):
    Probe.call(owner_id, "wake_in", 60)
    first = alarm_at(owner_id)
    Probe.call(owner_id, "wake_in", 3600)
    assert alarm_at(owner_id) == first
    Probe.call(owner_id, "wake_in", 5)
    assert alarm_at(owner_id) < first


def test_a_due_alarm_fires_once_and_clears(owner_id, inline_actors):
    Probe.call(owner_id, "wake_in", -1)
    run_lane("actor_alarms")
    assert alarm_runs(owner_id) == 1
    assert alarm_at(owner_id) is None
    run_lane("actor_alarms")
    assert alarm_runs(owner_id) == 1


def test_an_alarm_not_yet_due_waits(owner_id, inline_actors):
    Probe.call(owner_id, "wake_in", 600)
    run_lane("actor_alarms")
    assert alarm_runs(owner_id) == 0 and alarm_at(owner_id) is not None


@pytest.mark.queue
def test_an_alarm_lost_in_the_broker_is_found_on_the_next_tick(
    owner_id, celery_worker, monkeypatch, settings
):
    settings.KODY_ACTORS_INLINE = True
    Probe.call(owner_id, "wake_in", -1)
    settings.KODY_ACTORS_INLINE = False
    with monkeypatch.context() as patch:
        patch.setattr(transport, "push", lambda queue, message: None)  # the broker drops it
        run_lane("actor_alarms")
    assert alarm_at(owner_id) is not None
    run_lane("actor_alarms")  # next tick: cast onto the owner's shard, run by the worker
    deadline = time.monotonic() + 20
    while alarm_at(owner_id) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alarm_at(owner_id) is None
    assert alarm_runs(owner_id) == 1


def test_the_alarm_sweep_uses_the_partial_index(owner_id, inline_actors):
    from django.db import connection

    from kody.actors.alarms import due_alarms

    Probe.call(owner_id, "wake_in", -1)
    now = timezone.now() + timedelta(seconds=1)
    assert [due.user_id for due in due_alarms(now, None, 10)] == [owner_id]
    with connection.cursor() as cursor:
        cursor.execute("SET enable_seqscan = off")
        cursor.execute(
            "EXPLAIN SELECT user_id FROM kody_user_schemas"
            " WHERE alarm_at <= now() ORDER BY alarm_at LIMIT 10"
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("RESET enable_seqscan")
    assert "kody_user_schemas_alarm_ix" in plan


def test_due_alarms_are_chosen_and_deleted_by_the_app_clock(owner_id, inline_actors):
    """The app clock runs two days ahead of the database's: the lane finds the alarm due by
    the app clock, and ``fire`` must delete (and run) it by that same clock."""
    import time_machine

    with time_machine.travel(timezone.now() + timedelta(days=2), tick=True) as traveller:
        Probe.call(owner_id, "wake_in", 60)
        run_lane("actor_alarms")
        assert alarm_runs(owner_id) == 0  # not due yet by the app clock
        traveller.shift(timedelta(seconds=120))
        run_lane("actor_alarms")
        assert alarm_runs(owner_id) == 1
        assert alarm_at(owner_id) is None


def test_an_alarm_rearmed_at_an_instant_already_delivered_fires_again(owner_id, inline_actors):
    """The wake's idempotency key names the alarm's arming, not only its time: a duplicate
    cast of one arming is answered from its call record, but an alarm set again at the very
    instant of one that already fired is a new arming and wakes again."""
    from kody.actors.alarms import cast_alarm, due_alarms

    at = (timezone.now() - timedelta(seconds=5)).isoformat()
    Probe.call(owner_id, "wake_at", at)
    [first] = due_alarms(timezone.now(), None, 10)
    run_lane("actor_alarms")
    assert alarm_runs(owner_id) == 1 and alarm_at(owner_id) is None
    Probe.call(owner_id, "wake_at", at)
    cast_alarm(first, timezone.now())  # the first arming's wake, delivered twice
    assert alarm_runs(owner_id) == 1 and alarm_at(owner_id) is not None
    run_lane("actor_alarms")
    assert alarm_runs(owner_id) == 2 and alarm_at(owner_id) is None
    run_lane("actor_alarms")  # a tick with nothing armed wakes nothing
    assert alarm_runs(owner_id) == 2
