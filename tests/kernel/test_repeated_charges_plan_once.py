"""A user's repeated one-statement calls are planned once per database session.

From its third call on a session, a user's charge goes out as ``EXECUTE`` of statements that
session prepared for that user's schema (the owner check, the tombstone check, the charge
with its record), still in ONE round trip, with the same guarantees: a foreign owner is
refused, a recorded call is not charged twice, a session that lost its statements still
charges exactly once. ``KODY_ACTOR_PREPARED_MAX`` bounds what a session holds; 0 turns it
off.
"""

from __future__ import annotations

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import OwnerMismatch, prepared
from kody.actors.runtime import execute
from kody.userschema.naming import quoted, schema_name_for
from tests.kernel.probes import metered_users, probe_call, round_trips

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-07-04"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Two users with the day's counter row at 1."""
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_ACTOR_PREPARED_MAX = 128
    return metered_users(2, day=DAY, limit=100)


def charge(user: str) -> int:
    return UserMeter.call(user, "consume", resource=RESOURCE, day=DAY, limit=100)["count"]


def held_by_server() -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT name FROM pg_prepared_statements WHERE name LIKE 'kp\\_%%'")
        return {name for (name,) in cursor.fetchall()}


def test_a_users_third_charge_runs_prepared_in_the_same_one_round_trip(users):
    a, _ = users
    assert [charge(a), charge(a)] == [2, 3]
    with round_trips() as sent:
        assert charge(a) == 4
    (only,) = sent
    assert only.count("EXECUTE kp_") == 3 and "PREPARE" not in only
    assert "INSERT INTO actor_calls" not in only and only.endswith("COMMIT")
    assert set(prepared.held(connection)) <= held_by_server()


def test_a_recorded_call_is_answered_from_its_record_not_charged_again(users):
    a, _ = users
    charge(a), charge(a), charge(a)
    again = probe_call(a, "consume", actor=UserMeter.name, resource=RESOURCE, day=DAY, limit=100)
    first = execute([again])[0].unwrap()
    assert execute([again])[0].unwrap() == first
    assert charge(a) == first["count"] + 1


def test_the_prepared_owner_check_still_refuses_a_foreign_owner(users):
    a, b = users
    charge(a), charge(a), charge(a)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {quoted(schema_name_for(a))}.actor_owner SET owner_id = %s", [b])
    with pytest.raises(OwnerMismatch):
        charge(a)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {quoted(schema_name_for(a))}.actor_owner SET owner_id = %s", [a])
    assert charge(a) == 5  # the refused call charged nothing


def test_a_session_holds_at_most_the_configured_number(users, settings):
    settings.KODY_ACTOR_PREPARED_MAX = 2
    a, b = users
    for _ in range(3):
        assert charge(a) == charge(b)  # both users charged in step
    assert len(held_by_server()) <= 2
    assert charge(a) == 5 and charge(b) == 5


def test_zero_turns_prepared_statements_off(users, settings):
    settings.KODY_ACTOR_PREPARED_MAX = 0
    a, _ = users
    with round_trips() as sent:
        for _ in range(4):
            charge(a)
    assert len(sent) == 4 and not any("EXECUTE" in text or "PREPARE" in text for text in sent)


def test_a_session_that_lost_its_statements_still_charges_exactly_once(users):
    a, _ = users
    charge(a), charge(a), charge(a)
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")
    assert charge(a) == 5  # the EXECUTE fails, the plain path charges
    assert [charge(a), charge(a), charge(a)] == [6, 7, 8]
    with round_trips() as sent:
        assert charge(a) == 9
    assert len(sent) == 1 and "EXECUTE kp_" in sent[0]
