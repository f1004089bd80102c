"""What a call costs in round trips, counted in Django's query log.

The two paths of ``kody.actors.runtime``: calls whose method declares its whole effect as
one statement (the meter's charge; ``Probe.tally`` here) go out as ONE query, a batch of
many users' as well — prelude, every statement with its record, ``COMMIT``. Any other call
costs the prelude, its method's own statements, and one query ending the transaction.
Nothing here may be paid twice: a failed check falls back once, to the plain path.
"""

from __future__ import annotations

import pytest
from django.db import transaction

from apps.entitlements.actor import UserMeter
from kody.actors.runtime import execute
from kody.actors.wire import Call
from tests.kernel.probes import metered_users, probe_call, round_trips

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-07-04"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Three users, ascending, each with the day's counter row and Probe's tally row."""
    settings.KODY_ACTORS_INLINE = True
    ids = metered_users(3, day=DAY, limit=100)
    for user in ids:
        execute([probe_call(user, "tally", "first"), probe_call(user, "bump")])
    return ids


def charge(user: str, amount: int = 1) -> Call:
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": 100, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def test_a_lone_charge_is_one_round_trip_that_begins_and_commits(users):
    a, _, _ = users
    with round_trips() as sent:
        reading = UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=100)
    assert reading["count"] == 2
    (only,) = sent
    assert only.startswith("SELECT set_config('search_path'") and only.endswith("COMMIT")
    assert "actor_owner" in only and "INSERT INTO actor_calls" in only


def test_a_batch_of_several_users_charges_is_one_round_trip(users):
    a, b, c = users
    with round_trips() as sent:
        readings = [o.unwrap() for o in execute([charge(a, 2), charge(b, 3), charge(a), charge(c)])]
    assert len(sent) == 1
    assert [r["count"] for r in readings] == [3, 4, 4, 2]


def test_one_statement_calls_of_two_actors_share_the_round_trip(users):
    a, b, _ = users
    with round_trips() as sent:
        outcomes = execute([charge(a), probe_call(a, "tally", "x"), charge(b)])
    assert len(sent) == 1
    assert outcomes[1].unwrap() == {"count": 2, "label": "x", "doc": {"k": 2}, "twice": 2}


def test_a_lone_plain_call_is_its_statements_and_two_more(users):
    a, _, _ = users
    with round_trips() as sent:
        assert execute([probe_call(a, "rows_touched")])[0].ok
    prelude, *method, ending = sent
    assert len(method) == 2  # the method's own two statements, nothing between them
    assert "actor_owner" in prelude and "actor_calls" in prelude
    assert "INSERT INTO" in ending and ending.endswith("COMMIT")


def test_a_plain_batch_of_several_users_adds_no_round_trip_per_user(users):
    a, b, c = users
    with round_trips() as sent:
        outcomes = execute([probe_call(user, "rows_touched") for user in (a, b, c)])
    assert all(outcome.ok for outcome in outcomes)
    assert len(sent) == 2 + 3 * 2  # prelude, each method's two statements, the ending


def test_a_plain_method_that_sends_nothing_still_costs_two(users):
    a, _, _ = users
    with round_trips() as sent:
        assert execute([probe_call(a, "slow_echo", "x", 0)])[0].unwrap()["value"] == "x"
    assert len(sent) == 2


def test_a_call_the_one_statement_path_cannot_answer_falls_back_once(users):
    a, _, _ = users
    new_day = "2031-07-05"  # no counter row yet: the statement answers nothing
    with round_trips() as sent:
        reading = UserMeter.call(a, "consume", resource=RESOURCE, day=new_day, limit=9)
    assert reading["count"] == 1
    one_statement, rollback, prelude, *_, ending = sent
    assert one_statement.endswith("COMMIT")  # tried, failed before its COMMIT...
    assert rollback == "ROLLBACK"  # ...and rolled back
    assert "actor_owner" in prelude and ending.endswith("COMMIT")
    assert sent.count("ROLLBACK") == 1


def test_an_inline_call_inside_a_callers_transaction_never_commits_it(users):
    a, _, _ = users
    with transaction.atomic(), round_trips() as sent:
        UserMeter.call(a, "consume", resource=RESOURCE, day=DAY, limit=100)
        transaction.set_rollback(True)
    assert not any(sql.endswith("COMMIT") for sql in sent)
    assert UserMeter.call(a, "read", resource=RESOURCE, day=DAY)["count"] == 1
