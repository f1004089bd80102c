"""A lone planned call goes out in ONE round trip, its record joined to its statement (ADR 0042).

A call whose statement form is a ``Planned`` (``UserMeter.consume``; ``Probe.tally`` here)
and that runs alone — an inline call, a shard's batch of one — sends its prelude (``BEGIN``,
search path, timeouts, owner lock, tombstone), its statement with its record as one more
CTE, the fence guard and ``COMMIT`` as one query. The record stores the statement's rows
(``{"ok": true, "rows": …}``); the call's answer is made from those rows, and so is every
later answer from the record. A statement that finds no rows fails before anything commits,
and the method runs itself.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import fence
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import metered_users, prelude_paths, probe_call
from tests.kernel.sample_actors import ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-06-01"
RESOURCE = "execute_calls_per_day"
SPARE_SHARD = 61  # a shard no worker of these tests consumes


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return metered_users(2, day=DAY, limit=100)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with prelude_paths(monkeypatch, "fresh") as seen:
        yield seen


def charge(user: str, amount: int = 1, *, limit: int = 100) -> Call:
    """A ``consume`` as a shard worker gets it: its id off the wire, so not fresh."""
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": limit, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=DAY)["count"]


def record(user: str, call_id: str) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT outcome::text FROM "{schema_name_for(user)}".actor_calls WHERE id = %s',
            [call_id],
        )
        row = cursor.fetchone()
    return None if row is None else json.loads(row[0])


def test_a_lone_charge_is_one_query_and_its_record_holds_its_rows(users, paths):
    a, _ = users
    call = charge(a, 4)
    reading = execute([call])[0].unwrap()
    assert paths == {"fresh": 1, "fell_back": 0, "queries": 1}
    assert (reading["allowed"], reading["count"], reading["remaining"]) == (True, 5, 95)
    stored = record(a, call.id)
    assert stored is not None and stored["ok"] is True and "value" not in stored
    assert json.loads(stored["rows"]) == [
        {"allowed": True, "count": 5, "revision": reading["revision"]}
    ]
    assert count(a) == 5


def test_a_redelivered_charge_answers_its_rows_as_first_answered_and_charges_once(users, paths):
    a, _ = users
    call = charge(a, 2)
    first = execute([call])[0].unwrap()
    assert execute([charge(a, 10)])[0].unwrap()["count"] == 13  # the row moves on
    again = execute([call])[0].unwrap()
    assert again == first  # from the stored rows, not from the row as it is now
    assert paths["fell_back"] == 1  # its record's insert met the record: rolled back
    assert count(a) == 13


def test_a_refusal_is_one_query_too_and_is_replayed_as_a_refusal(users, paths):
    a, _ = users
    call = charge(a, 500)
    refused = execute([call])[0].unwrap()
    assert (refused["allowed"], refused["count"]) == (False, 1)
    assert paths == {"fresh": 1, "fell_back": 0, "queries": 1}
    execute([charge(a, 3)])
    assert execute([call])[0].unwrap() == refused
    assert count(a) == 4


def test_the_days_first_charge_rolls_back_and_the_method_bootstraps_once(users, paths):
    a, _ = users
    call = dataclasses.replace(charge(a, 2), kwargs={**charge(a, 2).kwargs, "day": "2031-06-02"})
    reading = execute([call])[0].unwrap()
    assert (reading["allowed"], reading["count"]) == (True, 2)
    assert paths["fell_back"] == 1  # no row: the statement divided by zero, nothing committed
    stored = record(a, call.id)
    assert stored is not None and stored["value"] == reading  # the method's own record
    assert UserMeter.call(a, "read", resource=RESOURCE, day="2031-06-02")["count"] == 2


def test_a_rows_record_answers_a_redelivery_inside_a_batch_of_several_users(users):
    """The plain batch path reads records too (``_batch_prelude``): a rows record is answered
    there from its rows."""
    a, b = users
    done = charge(a, 6)
    first = execute([done])[0].unwrap()
    again, other = execute([done, charge(b, 1)])
    assert again.unwrap() == first
    assert other.unwrap()["count"] == 2
    assert [count(a), count(b)] == [7, 2]


def test_another_user_is_not_answered_from_this_users_rows_record(users):
    a, b = users
    mine = charge(a, 3)
    assert execute([mine])[0].unwrap()["count"] == 4
    theirs = dataclasses.replace(charge(b, 8), id=mine.id)
    assert execute([theirs])[0].unwrap()["count"] == 9  # b's own first run of that id
    assert record(b, mine.id) is not None
    assert json.loads(record(a, mine.id)["rows"])[0]["count"] == 4  # a's left as it was
    assert [count(a), count(b)] == [4, 9]


def test_a_forged_lone_charge_into_another_users_schema_is_refused_and_changes_nothing(users):
    from kody.actors import OwnerMismatch

    a, b = users
    forged = dataclasses.replace(charge(a, 5), schema=schema_name_for(b))
    with pytest.raises(OwnerMismatch):
        execute([forged])[0].unwrap()
    assert record(b, forged.id) is None
    assert [count(a), count(b)] == [1, 1]


def test_rows_come_back_as_json_gives_them_repeated_names_and_objects_included(users, paths):
    a, _ = users
    execute([probe_call(a, "tally", "first")])  # the row's first call: the method makes it
    assert paths["fell_back"] == 1
    paths["queries"] = 0
    call = probe_call(a, "tally", "it's")
    answer = execute([call])[0].unwrap()
    assert answer == {"count": 2, "label": "it's", "doc": {"k": 2}, "twice": 2}
    assert paths == {"fresh": 2, "fell_back": 1, "queries": 1}
    assert execute([call])[0].unwrap() == answer  # replayed from the record


def test_an_answer_that_fails_after_commit_fails_alike_when_replayed(users):
    a, _ = users
    execute([probe_call(a, "tally", "x")])
    call = probe_call(a, "tally", "y", answer_fails=True)
    first = execute([call])[0]
    with pytest.raises(ProbeFailed):
        first.unwrap()
    again = execute([call])[0]
    assert not again.ok
    with pytest.raises(ProbeFailed):
        again.unwrap()
    # Its effect committed once, and the replay did not apply it again.
    assert execute([probe_call(a, "tally", "z")])[0].unwrap()["count"] == 3


def test_a_consumer_that_lost_its_shard_commits_nothing_in_the_one_query(users):
    a, _ = users
    epoch = fence.floor(SPARE_SHARD) + 1
    assert fence.claim(SPARE_SHARD, epoch)
    assert fence.claim(SPARE_SHARD, epoch + 1)  # a successor took the shard
    call = charge(a, 9)
    with fence.holding(fence.Fence(SPARE_SHARD, epoch)), pytest.raises(fence.FenceLost):
        execute([call])
    assert record(a, call.id) is None
    assert count(a) == 1
