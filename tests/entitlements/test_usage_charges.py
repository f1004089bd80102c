"""A charge leaves usage events only when it really applied: a replayed keyed consume adds
none, and a charge inside an actor call that rolls back leaves none."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from apps.entitlements import services
from apps.entitlements.models import UsageEvent
from apps.entitlements.services import enforcement, usage
from kody.actors import Actor
from kody.errors import KodyError

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 8, 20, 12, 0, tzinfo=UTC)
RESOURCE = "execute_calls_per_day"


class _CallFailed(KodyError):
    code = "call_failed"
    status = 409


class ChargeInCall(Actor):
    """Charges inside its own call, then fails when asked: the caller's writes roll back."""

    name = "tests.entitlements.ChargeInCall"

    def charge(self, units: int, fail: bool) -> dict[str, int]:
        charged = services.consume_in_call(self.context, RESOURCE, units, now=NOON)
        if fail:
            raise _CallFailed("the call failed after charging")
        return {"count": charged.count}


def _events(user) -> int:  # type: ignore[no-untyped-def]
    usage.drain_buffer()
    return UsageEvent.objects.filter(user_id=user.stable_user_id, metric=RESOURCE).count()


def test_a_replayed_keyed_consume_writes_one_event_not_two(owner, outsider):
    first = services.consume(owner, RESOURCE, now=NOON, key="request-1")
    again = services.consume(owner, RESOURCE, now=NOON, key="request-1")
    assert again.count == first.count == 1  # answered from the meter's record: one charge
    services.consume(outsider, RESOURCE, now=NOON, key="request-1")
    assert _events(owner) == 1
    assert _events(outsider) == 1


def test_two_distinct_charges_write_two_events(owner):
    services.consume(owner, RESOURCE, now=NOON, key="request-1")
    services.consume(owner, RESOURCE, now=NOON, key="request-2")
    services.consume(owner, RESOURCE, 2, now=NOON)
    assert _events(owner) == 4


def test_an_in_call_charge_records_when_the_call_commits(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert ChargeInCall.call(owner.stable_user_id, "charge", units=2, fail=False)["count"] == 2
    assert _events(owner) == 2


def test_a_rolled_back_in_call_charge_writes_no_event(owner, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(_CallFailed):
        ChargeInCall.call(owner.stable_user_id, "charge", units=2, fail=True)
    assert _events(owner) == 0
    assert enforcement.current_use(owner.stable_user_id, RESOURCE, now=NOON) == 0  # undone
