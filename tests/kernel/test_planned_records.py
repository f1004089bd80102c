"""A planned batch's record check is its records' insert (ADR 0039).

A batch whose every call has a statement form (ADR 0037) runs nothing but SQL inside its one
transaction, so it needs no record read in front of its statements: the records' insert
names each call id and, without ``ON CONFLICT``, fails on a call that already has a record.
The whole transaction rolls back — the recorded call's repeated charge with it — and the
plain path answers that call from its record and runs the others once. The tombstone and
owner checks stay in front of the statements.
"""

from __future__ import annotations

import dataclasses

import pytest
from django.db import IntegrityError, connection, transaction

from apps.entitlements.actor import UserMeter
from kody.actors import runtime
from kody.actors.runtime import execute
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import metered_users, prelude_paths, probe_call, sent_with_the_prelude

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-05-02"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return metered_users(3, day=DAY, limit=100)


def charge(user: str, amount: int = 1) -> object:
    """A ``consume`` as a shard worker gets it: its id off the wire, so not fresh."""
    kwargs = {"resource": RESOURCE, "day": DAY, "limit": 100, "amount": amount}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=DAY)["count"]


def test_a_planned_batch_reads_no_records_before_its_statements(users):
    a, b, _ = users
    with sent_with_the_prelude() as queries:
        assert all(o.ok for o in execute([charge(a), charge(b)]))
    # One query (ADR 0043): the checks, each charge with its record's insert, COMMIT.
    (query,) = queries
    statements = query.split(";\n")
    charges = [i for i, t in enumerate(statements) if "INSERT INTO actor_calls" in t]
    assert len(charges) == 2 and statements[-1] == "COMMIT"
    assert any("deleting_at" in t for t in statements)  # the tombstone is still checked
    assert not any("actor_calls" in t for t in statements[: charges[0]])  # no record read
    assert not any("ON CONFLICT" in statements[i].split("kody_record")[1] for i in charges)
    assert [count(a), count(b)] == [2, 2]


def test_a_partly_redelivered_batch_charges_the_recorded_call_once(users, monkeypatch):
    a, b, c = users
    done = charge(a, 5)
    first = execute([done, charge(b, 1)])[0].unwrap()
    assert first["count"] == 6
    with prelude_paths(monkeypatch, "optimistic", runs="_run_fresh_batch") as seen:
        again, new_b, new_c = execute([done, charge(b, 2), charge(c, 3)])
    # The records' insert met a's record: rolled back, and the plain path answered.
    assert (seen["optimistic"], seen["fell_back"]) == (1, 1)
    assert again.unwrap() == first
    assert (new_b.unwrap()["count"], new_c.unwrap()["count"]) == (4, 4)
    assert [count(a), count(b), count(c)] == [6, 4, 4]


def test_a_redelivered_lone_planned_call_answers_its_record(users, monkeypatch):
    a = users[0]
    call = charge(a, 7)
    assert runtime._planned([runtime._Group(a, call.schema, [0], [call])]) is not None
    first = execute([call])[0].unwrap()
    with prelude_paths(monkeypatch, "optimistic") as seen:
        again = execute([call])[0].unwrap()
    assert (seen["optimistic"], seen["fell_back"]) == (1, 1)
    assert again == first and first["count"] == 8
    assert count(a) == 8


def test_a_lone_call_off_the_planned_path_still_checks_its_record_first(users, settings):
    """``refund`` has no statement form: a lone refund with its id off the wire checks for
    its record in the prelude, and a second run answers from it."""
    a = users[0]
    assert execute([charge(a, 2)])[0].unwrap()["count"] == 3
    kwargs = {"resource": RESOURCE, "day": DAY, "amount": 1}
    call = probe_call(a, "refund", actor=UserMeter.name, **kwargs)
    with sent_with_the_prelude() as queries:
        assert execute([call])[0].unwrap()["count"] == 2
    assert "actor_calls WHERE id IN" in queries[0]
    assert execute([call])[0].unwrap()["count"] == 2  # answered from the record
    assert count(a) == 2


def test_another_users_batch_is_not_answered_from_these_records(users):
    """A record's call id is per schema: the same id sent for another user is that user's
    own first call, charged once, and the first user's record is left as it was."""
    a, b, _ = users
    mine = charge(a, 4)
    assert execute([mine, charge(b)])[0].unwrap()["count"] == 5
    theirs = dataclasses.replace(charge(b, 9), id=mine.id)
    outcomes = execute([mine, theirs])
    assert outcomes[0].unwrap()["count"] == 5  # a's record
    assert outcomes[1].unwrap()["count"] == 11  # b: 1 + 1 + 9
    assert [count(a), count(b)] == [5, 11]


def test_only_a_call_records_unique_violation_counts_as_recorded(users):
    a = users[0]
    schema = schema_name_for(a)
    call = charge(a)
    execute([call])

    def violation(sql: str) -> IntegrityError:
        with pytest.raises(IntegrityError) as caught:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(sql)
        return caught.value

    record = violation(
        f'INSERT INTO "{schema}".actor_calls (id, actor, method, outcome, created_at)'
        f" VALUES ('{call.id}', 'm', 'consume', '{{}}'::jsonb, now())"
    )
    other = violation(f"INSERT INTO \"{schema}\".actor_owner (id, owner_id) VALUES (1, 'someone')")
    assert runtime._recorded(record)
    assert not runtime._recorded(other)
