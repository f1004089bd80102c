"""A batch whose every statement is a ``Planned`` goes out in ONE round trip (ADR 0043).

ADR 0042 joined a lone call's record to its statement; a shard batch of several users' (or
one user's several) planned calls does the same for each call: every user's search path,
owner lock and statements, each statement with its record's insert as one more CTE holding
its rows, the tombstone check, the prunes when due, the fence guard and ``COMMIT`` — one
query. Each answer is made from its stored rows, and so is every later answer from the
record. Run with prepared statements off (every check in the prelude) and on (each user's
lock on its own path, the tombstone last: ADR 0040), which send different layouts.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import OwnerMismatch, fence
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import mark_deleting, unmark_deleting
from tests.kernel.probes import metered_users, prelude_paths, probe_call, sent_with_the_prelude
from tests.kernel.sample_actors import ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-07-04"
RESOURCE = "execute_calls_per_day"
SPARE_SHARD = 62  # a shard no worker of these tests consumes


@pytest.fixture(params=[0, 128], ids=["unprepared", "prepared"])
def users(request, user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Three users, ascending, each with today's counter row and Probe's tally row; the
    session's prepared statements off or on, and warmed up so the layout is the mode's."""
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_ACTOR_PREPARED_MAX = request.param
    ids = metered_users(3, day=DAY, limit=100)
    for user in ids:
        execute([probe_call(user, "tally", "first")])  # the row's first call: the method
    return ids


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with prelude_paths(monkeypatch, "optimistic", runs="_run_fresh_batch") as counts:
        counts["queries"] = 0
        yield counts


def charge(user: str, amount: int = 1, *, limit: int = 100) -> Call:
    """A ``consume`` as a shard worker gets it: its id off the wire, so not fresh."""
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": limit, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=DAY)["count"]


def tallied(user: str) -> int:
    """Probe's tally so far, read by a planned tally of its own (which adds one)."""
    return execute([probe_call(user, "tally", "read")])[0].unwrap()["count"] - 1


def record(user: str, call_id: str) -> dict | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT outcome::text FROM "{schema_name_for(user)}".actor_calls WHERE id = %s',
            [call_id],
        )
        row = cursor.fetchone()
    return None if row is None else json.loads(row[0])


def test_a_batch_of_several_users_is_one_query_and_each_record_holds_its_rows(users, seen):
    a, b, c = users
    for _ in range(2):  # warm: with prepared statements on, the second batch prepares
        execute([charge(a), charge(b), charge(c)])
    seen["queries"] = 0
    batch = [charge(a, 2), charge(b, 3), charge(a, 4), charge(c, 5)]
    with sent_with_the_prelude() as queries:
        readings = [outcome.unwrap() for outcome in execute(batch)]
    assert (seen["queries"], seen["fell_back"], len(queries)) == (1, 0, 1)
    assert queries[0].startswith("BEGIN") and queries[0].endswith("COMMIT")
    assert [(r["allowed"], r["count"]) for r in readings] == [
        (True, 5),
        (True, 6),
        (True, 9),
        (True, 8),
    ]
    for call, reading in zip(batch, readings, strict=True):
        stored = record(call.user_id, call.id)
        assert stored is not None and stored["ok"] is True
        assert json.loads(stored["rows"])[0]["count"] == reading["count"]
    assert [count(user) for user in users] == [9, 6, 8]


def test_two_actors_of_each_user_interleaved_are_one_query_and_apply_once(users, seen):
    a, b, _ = users
    batch = [charge(a), probe_call(a, "tally", "x"), charge(b, 2), probe_call(b, "tally", "y")]
    outcomes = [outcome.unwrap() for outcome in execute(batch)]
    assert (seen["queries"], seen["fell_back"]) == (1, 0)
    assert [outcomes[0]["count"], outcomes[2]["count"]] == [2, 3]
    assert outcomes[1] == {"count": 2, "label": "x", "doc": {"k": 2}, "twice": 2}
    assert outcomes[3]["label"] == "y" and outcomes[3]["count"] == 2
    assert [o.unwrap() for o in execute(batch)] == outcomes  # a redelivery: the records
    assert [count(a), count(b), tallied(a), tallied(b)] == [2, 3, 2, 2]


def test_a_redelivered_batch_answers_from_its_rows_and_runs_the_new_calls_once(users, seen):
    a, b, c = users
    done = [charge(a, 5), charge(b, 1)]
    first = [outcome.unwrap() for outcome in execute(done)]
    seen["queries"] = seen["fell_back"] = 0
    outcomes = [outcome.unwrap() for outcome in execute([*done, charge(c, 3)])]
    assert seen["fell_back"] == 1  # a record's insert failed: the plain path answered
    assert outcomes[:2] == first
    assert outcomes[2]["count"] == 4
    assert [count(a), count(b), count(c)] == [6, 2, 4]


def test_an_answer_that_fails_after_commit_fails_that_call_alone_and_alike_on_replay(users):
    a, b, _ = users
    failing = probe_call(a, "tally", "y", answer_fails=True)
    batch = [failing, charge(b, 2)]
    first = execute(batch)
    with pytest.raises(ProbeFailed):
        first[0].unwrap()
    assert first[1].unwrap()["count"] == 3
    again = execute(batch)  # the same ids: answered from the records
    with pytest.raises(ProbeFailed):
        again[0].unwrap()
    assert again[1].unwrap() == first[1].unwrap()
    # Each effect committed once; the replay applied nothing again.
    assert [tallied(a), count(b)] == [2, 3]


def test_the_days_first_charge_in_a_batch_commits_nothing_then_applies_each_once(users, seen):
    a, b, _ = users
    new_day = "2031-07-05"  # no row yet: that statement answers nothing
    late = probe_call(b, "consume", actor=UserMeter.name, resource=RESOURCE, day=new_day, limit=9)
    charged, first = execute([charge(a, 2), late])
    assert seen["fell_back"] == 1 and seen["queries"] > 1
    assert (charged.unwrap()["count"], first.unwrap()["count"]) == (3, 1)
    assert [count(a), count(b)] == [3, 1]
    assert UserMeter.call(b, "read", resource=RESOURCE, day=new_day)["count"] == 1


def test_a_forged_call_in_the_batch_is_refused_and_changes_nothing_of_the_owners(users):
    owner, outsider, third = users
    forged = dataclasses.replace(charge(outsider, 50), schema=schema_name_for(owner))
    refused, charged = execute([forged, charge(third, 2)])
    with pytest.raises(OwnerMismatch):
        refused.unwrap()
    assert charged.unwrap()["count"] == 3
    assert record(owner, forged.id) is None and record(outsider, forged.id) is None
    assert [count(owner), count(outsider), count(third)] == [1, 1, 3]


def test_another_user_with_the_same_call_id_is_not_answered_from_these_rows(users):
    a, b, _ = users
    mine = charge(a, 4)
    assert execute([mine, charge(b)])[0].unwrap()["count"] == 5
    theirs = dataclasses.replace(charge(b, 9), id=mine.id)
    outcomes = execute([theirs, charge(a)])
    assert outcomes[0].unwrap()["count"] == 11  # b's own first run of that id: 2 + 9
    assert json.loads(record(a, mine.id)["rows"])[0]["count"] == 5  # a's left as it was
    assert [count(a), count(b)] == [6, 11]


def test_a_user_marked_for_deletion_is_refused_and_the_rest_charge_once(users):
    a, b, _ = users
    mark_deleting(b)
    try:
        charged, refused = execute([charge(a, 2), charge(b, 2)])
        assert charged.unwrap()["count"] == 3
        assert not refused.ok and "AccountDeleting" in refused.text
    finally:
        unmark_deleting(b)
    assert [count(a), count(b)] == [3, 1]


def test_a_consumer_that_lost_its_shard_commits_nothing_of_the_batch(users):
    a, b, _ = users
    epoch = fence.floor(SPARE_SHARD) + 1
    assert fence.claim(SPARE_SHARD, epoch)
    assert fence.claim(SPARE_SHARD, epoch + 1)  # a successor took the shard
    batch = [charge(a, 9), charge(b, 9)]
    with fence.holding(fence.Fence(SPARE_SHARD, epoch)), pytest.raises(fence.FenceLost):
        execute(batch)
    assert [record(call.user_id, call.id) for call in batch] == [None, None]
    assert [count(a), count(b)] == [1, 1]
