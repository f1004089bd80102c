"""Exactly once per (user, key): a call that already ran answers from its record and applies
nothing again — on the one-statement path and the plain path alike, alone or in a batch.

Every record has one format, the outcome as it was answered (``{"ok": …, "value": …}`` or
``{"ok": false, "error": …}``), whichever path wrote it; a redelivery is answered with
exactly that.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import counter, metered_users, probe_call, round_trips
from tests.kernel.sample_actors import ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)

# A fixed day long past: a charge prunes the counter rows more than a week older than its
# day, and Probe's counter (today's row) must outlive the charges.
DAY = "2001-07-04"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Three users, ascending, each with the day's counter row at 1 and Probe's at 1."""
    settings.KODY_ACTORS_INLINE = True
    ids = metered_users(3, day=DAY, limit=100)
    for user in ids:
        execute([probe_call(user, "bump")])
    return ids


def charge(user: str, amount: int = 1) -> Call:
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": 100, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=DAY)["count"]


def values(outcomes: list) -> list:  # type: ignore[type-arg]
    return [outcome.unwrap() for outcome in outcomes]


def record(user: str, call_id: str) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT outcome::text FROM "{schema_name_for(user)}".actor_calls WHERE id = %s',
            [call_id],
        )
        row = cursor.fetchone()
    return None if row is None else json.loads(row[0])


@pytest.mark.parametrize("batched", [False, True], ids=["lone", "batch"])
def test_a_redelivered_charge_answers_as_first_answered_and_charges_once(users, batched):
    a, b, _ = users
    calls = [charge(a, 5), charge(b)] if batched else [charge(a, 5)]
    first = values(execute(calls))
    with round_trips() as sent:
        again = values(execute(calls))
    assert again == first
    assert len(sent) > 1  # the one statement met the records and rolled back
    assert count(a) == 6 and count(b) == (2 if batched else 1)


def test_a_refusal_is_recorded_and_replayed_as_the_same_refusal(users):
    a, _, _ = users
    over = probe_call(a, "consume", actor=UserMeter.name, resource=RESOURCE, day=DAY, limit=1)
    (first,) = values(execute([over]))
    assert first["allowed"] is False and first["count"] == 1
    assert values(execute([over])) == [first]
    assert record(a, over.id) == {"ok": True, "value": first}


def test_both_paths_write_the_one_record_format(users):
    a, _, _ = users
    charged, bumped, failed = charge(a), probe_call(a, "bump"), probe_call(a, "fail", "no")
    reading = execute([charged])[0].unwrap()
    assert execute([bumped, failed])[0].unwrap() == 2
    assert record(a, charged.id) == {"ok": True, "value": reading}
    assert record(a, bumped.id) == {"ok": True, "value": 2}
    stored = record(a, failed.id)
    assert stored is not None and stored["ok"] is False and "ProbeFailed" in stored["error"]["type"]


def test_a_partly_redelivered_batch_runs_only_its_new_calls(users):
    a, b, c = users
    done = [charge(a, 5), charge(b)]
    first = values(execute(done))
    outcomes = values(execute([*done, charge(c, 3)]))
    assert outcomes[:2] == first and outcomes[2]["count"] == 4
    assert [count(a), count(b), count(c)] == [6, 2, 4]


def test_a_redelivered_plain_batch_answers_from_its_records(users):
    a, b, c = users
    before = [counter(user) for user in users]
    batch = [probe_call(a, "bump"), probe_call(b, "bump"), probe_call(a, "bump")]
    expected = [before[0] + 2, before[1] + 2, before[0] + 3]
    assert values(execute(batch)) == expected
    assert values(execute(batch)) == expected
    mixed = [probe_call(c, "bump"), batch[1]]  # one recorded call among new ones
    assert values(execute(mixed)) == [before[2] + 2, before[1] + 2]
    assert [counter(user) for user in users] == [before[0] + 3, before[1] + 2, before[2] + 2]


def test_a_failed_method_is_recorded_and_its_neighbours_commit(users):
    a, _, _ = users
    before = counter(a)
    batch = [probe_call(a, "bump"), probe_call(a, "fail", "no"), probe_call(a, "bump")]
    first, failed, last = execute(batch)
    with pytest.raises(ProbeFailed):
        failed.unwrap()
    assert (first.unwrap(), last.unwrap()) == (before + 2, before + 3)
    assert counter(a) == before + 3  # the failed call's own bump rolled back
    with pytest.raises(ProbeFailed):
        execute(batch)[1].unwrap()  # answered from its record, the error included
    assert counter(a) == before + 4


def test_the_same_id_twice_in_a_batch_runs_once(users):
    a, b, _ = users
    twice = charge(b, 2)
    assert [r["count"] for r in values(execute([charge(a), twice, twice]))] == [2, 3, 3]
    assert count(b) == 3


def test_another_user_with_the_same_call_id_is_not_answered_from_these_records(users):
    a, b, _ = users
    mine = charge(a, 4)
    assert execute([mine, charge(b)])[0].unwrap()["count"] == 5
    theirs = dataclasses.replace(charge(b, 9), id=mine.id)
    assert execute([theirs, charge(a)])[0].unwrap()["count"] == 11  # b's own first run
    assert record(a, mine.id)["value"]["count"] == 5  # type: ignore[index]
    assert [count(a), count(b)] == [6, 11]


def test_the_days_first_charge_runs_the_method_once_for_every_call_of_the_batch(users):
    a, b, _ = users
    new_day = "2001-07-05"  # no row yet: the statement answers nothing
    late = probe_call(b, "consume", actor=UserMeter.name, resource=RESOURCE, day=new_day, limit=9)
    charged, first = values(execute([charge(a, 2), late]))
    assert (charged["count"], first["count"]) == (3, 1)
    assert values(execute([late])) == [first]
    assert [count(a), count(b)] == [3, 1]
    assert UserMeter.call(b, "read", resource=RESOURCE, day=new_day)["count"] == 1


def test_a_value_of_every_kind_comes_back_from_its_record_as_first_answered(users):
    a, _, _ = users
    tally = probe_call(a, "tally", "first")  # the row's first call: the method runs it
    assert execute([tally])[0].unwrap()["count"] == 1
    again = probe_call(a, "tally", 'it\'s a "label" with % and \\')
    (answered,) = values(execute([again]))
    assert answered == {"count": 2, "label": again.args[0], "doc": {"k": 2}, "twice": 2}
    assert values(execute([again])) == [answered]
