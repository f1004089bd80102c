"""A batch whose every call has a statement form goes out in one query (ADR 0037, 0043).

``UserMeter.consume`` declares one (``kody.actors.one_statement``): its charge, or on a
refusal the row as it stands, as one statement. A shard batch of such calls sends every
user's statement behind the batch's prelude (owner locks, tombstones) in one query, each with
its record joined to it, whose insert is the record check (ADR 0039), the fence guard and
``COMMIT`` after them: ONE round trip for the whole batch (ADR 0043), where it took one per
user, then two.
Anything the rows cannot answer (the day's first charge, bad arguments, a call without a
form) rolls the attempt back and the methods run themselves, so every call still applies
exactly once; another user's forged call is still refused and changes nothing of theirs.
"""

from __future__ import annotations

import uuid

import pytest

from apps.entitlements.actor import UserMeter
from apps.entitlements.actor.meter import UnknownResource
from kody.actors import OwnerMismatch
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.probes import metered_users, prelude_paths, probe_call

pytestmark = pytest.mark.django_db(transaction=True)

DAY = "2031-03-14"
RESOURCE = "execute_calls_per_day"


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    """Three users, ascending, each with today's counter row (one inline charge each)."""
    settings.KODY_ACTORS_INLINE = True
    return metered_users(3, day=DAY, limit=100)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with prelude_paths(monkeypatch, "optimistic", runs="_run_fresh_batch") as seen:
        yield seen


def charge(user: str, amount: int = 1, *, limit: int = 100, day: str = DAY, **kw: object) -> Call:
    """A ``consume`` call as a shard worker gets it: not fresh, its id off the wire."""
    kwargs = {"resource": RESOURCE, "day": day, "limit": limit, "amount": amount, **kw}
    return probe_call(user, "consume", actor=UserMeter.name, **kwargs)


def count(user: str, day: str = DAY) -> int:
    return UserMeter.call(user, "read", resource=RESOURCE, day=day)["count"]


def test_a_batch_of_charges_goes_out_in_one_round_trip(users, sent):
    a, b, c = users
    batch = [charge(a, 2), charge(b, 3), charge(a, 4), charge(c, 5)]
    sent["queries"] = 0
    readings = [outcome.unwrap() for outcome in execute(batch)]
    # Every user's statements, each with its record, in the prelude's query with COMMIT.
    assert sent == {"optimistic": 1, "fell_back": 0, "queries": 1}
    assert [(r["allowed"], r["count"]) for r in readings] == [
        (True, 3),
        (True, 4),
        (True, 7),
        (True, 6),
    ]
    assert [count(user) for user in users] == [7, 4, 6]


def test_one_users_several_charges_go_out_together(users, sent):
    a = users[0]
    sent["queries"] = 0
    readings = [o.unwrap() for o in execute([charge(a, 1), charge(a, 1), charge(a, 1)])]
    assert sent["queries"] == 1
    assert [r["count"] for r in readings] == [2, 3, 4]
    assert count(a) == 4


def test_a_refusal_is_answered_in_the_batch_and_the_others_are_charged(users, sent):
    a, b, _ = users
    sent["queries"] = 0
    refused, charged = execute([charge(a, 5, limit=3), charge(b, 2, limit=100)])
    assert sent == {"optimistic": 1, "fell_back": 0, "queries": 1}  # no rerun for a refusal
    assert refused.unwrap() == {
        "resource": RESOURCE,
        "day": DAY,
        "allowed": False,
        "count": 1,
        "limit": 3,
        "remaining": 2,
        "revision": 1,
        "needs_bootstrap": False,
    }
    assert charged.unwrap()["count"] == 3
    assert (count(a), count(b)) == (1, 3)


def test_the_days_first_charge_runs_the_methods_and_applies_each_once(users, sent):
    a, b, _ = users
    new_day = "2031-03-15"  # no row yet: the statement answers nothing, the method bootstraps
    sent["queries"] = 0
    first, second = execute([charge(a, 2), charge(b, 3, day=new_day)])
    assert sent["queries"] > 1  # the attempt rolled back; the plain path ran the methods
    assert (first.unwrap()["count"], second.unwrap()["count"]) == (3, 3)
    # The rolled-back attempt charged nobody: each call applied exactly once.
    assert (count(a), count(b), count(b, new_day)) == (3, 1, 3)


def test_a_redelivered_batch_answers_from_its_records_and_charges_nothing(users):
    a, b, _ = users
    batch = [charge(a, 2), charge(b, 2)]
    first = [o.unwrap() for o in execute(batch)]
    again = [o.unwrap() for o in execute(batch)]  # the same ids: a shard's redelivery
    assert again == first and [r["count"] for r in again] == [3, 3]
    assert (count(a), count(b)) == (3, 3)


def test_a_call_without_a_statement_form_runs_every_method(users, sent):
    a, b, _ = users
    refund = probe_call(b, "refund", actor=UserMeter.name, resource=RESOURCE, day=DAY, amount=1)
    sent["queries"] = 0
    charged, refunded = execute([charge(a, 2), refund])
    assert sent["queries"] > 1
    assert charged.unwrap()["count"] == 3 and refunded.unwrap()["count"] == 0
    assert (count(a), count(b)) == (3, 0)


def test_bad_arguments_are_answered_by_the_method_and_the_rest_applies_once(users):
    a, b, _ = users
    bad = probe_call(a, "consume", actor=UserMeter.name, resource="no_such", day=DAY, limit=9)
    wrong, charged = execute([bad, charge(b, 4)])
    with pytest.raises(UnknownResource):
        wrong.unwrap()
    assert charged.unwrap()["count"] == 5
    assert (count(a), count(b)) == (1, 5)


def test_a_forged_call_for_another_users_schema_is_refused_and_changes_nothing(users):
    owner, outsider, third = users
    forged = Call(
        id=uuid.uuid4().hex,
        user_id=outsider,
        schema=schema_name_for(owner),  # the outsider aims at the owner's meter
        actor=UserMeter.name,
        method="consume",
        kwargs={"resource": RESOURCE, "day": DAY, "limit": 100, "amount": 50},
    )
    refused, charged = execute([forged, charge(third, 2)])
    with pytest.raises(OwnerMismatch):
        refused.unwrap()
    assert charged.unwrap()["count"] == 3
    assert (count(owner), count(outsider), count(third)) == (1, 1, 3)


def test_one_users_charges_on_a_new_day_fall_back_and_apply_once(users, sent):
    a = users[0]
    new_day = "2031-03-16"
    sent["queries"] = 0
    first, second = execute([charge(a, 2, day=new_day), charge(a, 3, day=new_day)])
    assert sent["queries"] > 1  # rolled back; the plain path ran each call's method
    assert (first.unwrap()["count"], second.unwrap()["count"]) == (2, 5)
    assert (count(a), count(a, new_day)) == (1, 5)
