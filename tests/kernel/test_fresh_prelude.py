"""A fresh inline call: its prelude goes out with the method's first statement (ADR 0027).

An inline call without an idempotency key has an id generated for that one run, so it cannot
have a call record: the runtime skips the lookup and sends ``BEGIN``, the search path, the
owner lock and the tombstone check in front of the method's first statement, as statements
that fail (and so stop the query before the method's statement) when the owner differs or
the user is marked for deletion. These tests pin the round trips (two, where the plain path
takes three) and that every refusal, error and odd method still ends as on the plain path.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection
from django.utils import timezone

from apps.entitlements.actor import UserMeter
from kody.actors import ActorUnavailable, OwnerMismatch
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.errors import AccountDeleting
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import mark_deleting, unmark_deleting
from tests.kernel.probes import (
    counter,
    owner_lock_held,
    prelude_paths,
    sent_with_the_prelude,
)
from tests.kernel.probes import probe_call as call
from tests.kernel.sample_actors import ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)


def fresh(one: Call):  # type: ignore[no-untyped-def]
    return execute([one], fresh=True)[0]


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    with prelude_paths(monkeypatch, "fresh") as seen:
        yield seen


def test_a_keyless_inline_call_is_one_query_and_so_is_a_keyed_one(users, paths):
    """A lone charge's statement carries its record, fence guard and ``COMMIT`` (ADR 0042)."""
    a, _ = users
    charge = {"resource": "execute_calls_per_day", "day": timezone.now().date().isoformat()}
    before = UserMeter.call(a, "read", **charge)["count"]
    paths["queries"] = 0  # the read's own
    assert UserMeter.call(a, "consume", limit=10, **charge)["count"] == before + 1
    assert paths == {"fresh": 1, "fell_back": 0, "queries": 1}
    paths["queries"] = 0
    first = UserMeter.call(a, "consume", limit=10, idempotency_key="k", **charge)
    assert paths == {"fresh": 2, "fell_back": 0, "queries": 1}  # keyed: checked by its insert
    paths["queries"] = 0
    # Its retry meets the record: the record's insert is its record check (ADR 0039), so the
    # charge's one query rolls back, and the plain path answers from the record (its
    # prelude reads it, then COMMIT).
    assert UserMeter.call(a, "consume", limit=10, idempotency_key="k", **charge) == first
    assert paths == {"fresh": 3, "fell_back": 1, "queries": 1 + 2}
    assert UserMeter.call(a, "read", **charge)["count"] == first["count"] == before + 2


def test_the_prelude_rides_on_the_first_statement_with_its_begin(users, settings):
    # The prelude's plain text; with prepared statements its lock check is the schema's own
    # prepared statement once seen twice (tests/kernel/test_prepared_batches.py).
    settings.KODY_ACTOR_PREPARED_MAX = 0
    a, _ = users
    with sent_with_the_prelude() as sent:
        assert fresh(call(a, "rows_touched")).unwrap()["touched"] == 1
    first = sent[0].split(";\n")
    assert first[0] == "BEGIN"
    assert "set_config('search_path'" in first[1]
    assert "FOR UPDATE" in first[2] and "actor_owner" in first[2]
    assert "deleting_at" in first[3]
    assert first[4].startswith("UPDATE daily_counters")  # the method's own statement
    assert sent[-1].rstrip().endswith("COMMIT")


def test_a_forged_owner_is_refused_and_nothing_of_the_method_applies(users, paths):
    a, b = users
    before = counter(a)
    with pytest.raises(OwnerMismatch):
        fresh(call(b, "bump", schema_of=a)).unwrap()
    with pytest.raises(OwnerMismatch):  # a method that sends no statement: checked at COMMIT
        fresh(call(b, "slow_echo", "x", 0, schema_of=a)).unwrap()
    assert counter(a) == before + 1  # only counter()'s own first bump
    assert paths["fell_back"] == 2


def test_a_tombstone_refuses_all_but_deletion_safe_methods(users, paths):
    a, _ = users
    before = counter(a)
    mark_deleting(a)
    try:
        refused = fresh(call(a, "bump"))
        allowed = fresh(call(a, "export_counters", actor=UserMeter.name))
    finally:
        unmark_deleting(a)
    with pytest.raises(AccountDeleting):
        refused.unwrap()
    assert refused.recordable is False
    assert allowed.ok
    assert paths == {"fresh": 3, "fell_back": 1, "queries": paths["queries"]}
    assert counter(a) == before + 1


def test_a_method_error_is_recorded_and_its_writes_rolled_back(users, paths):
    a, _ = users
    before = counter(a)
    outcome = fresh(call(a, "fail", "no"))
    with pytest.raises(ProbeFailed):
        outcome.unwrap()
    assert outcome.recordable is True
    assert counter(a) == before + 1


def test_a_statement_around_the_wrappers_sends_the_call_the_plain_way(users, paths):
    a, _ = users
    before = counter(a)
    paths["fell_back"] = 0
    assert fresh(call(a, "raw_first")).unwrap() == before + 2
    assert paths["fell_back"] == 1
    assert counter(a) == before + 2  # applied once


def test_a_swallowed_prelude_error_still_refuses(users, paths):
    a, b = users
    with pytest.raises(OwnerMismatch):
        fresh(call(b, "swallow_first", schema_of=a)).unwrap()
    assert fresh(call(a, "swallow_first")).unwrap() == "ran"


def test_executemany_first_and_the_search_path_after(users):
    a, _ = users
    seen = fresh(call(a, "many_first")).unwrap()
    assert seen["search_path"].startswith(schema_name_for(a))
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        assert cursor.fetchone()[0] == '"$user", public'


def test_a_held_owner_lock_costs_one_lock_timeout(users, paths, settings):
    a, _ = users
    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 200
    with owner_lock_held(a):
        paths["fell_back"] = 0
        outcome = fresh(call(a, "bump"))
    with pytest.raises(ActorUnavailable) as refused:
        outcome.unwrap()
    assert refused.value.details == {"reason": "lock_timeout"}
    assert paths["fell_back"] == 0  # answered from the fresh attempt, no second wait
