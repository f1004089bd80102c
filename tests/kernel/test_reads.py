"""Reads beside the writer (ADR 0030): a ``@reads`` method runs on the caller's connection.

It runs in a read-only snapshot with no owner lock and no call record, so it neither waits in
the user's queue nor for a transaction holding the user's lock; it still refuses another
user's schema and, unless ``@deletion_safe``, an account marked for deletion; a write inside
it fails; the housekeeping it asks for reaches the writer after it.
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection, transaction

from kody.actors import OwnerMismatch, readonly
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.errors import AccountDeleting
from kody.userschema.hibernation import hibernate_schema
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import known, mark_deleting, unmark_deleting
from tests.kernel.conftest import clear_actor_queues
from tests.kernel.probes import owner_lock_held
from tests.kernel.probes import probe_call as call
from tests.kernel.sample_actors import Probe

pytestmark = pytest.mark.django_db(transaction=True)


def _records(user: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT count(*) FROM {schema_name_for(user)}.actor_calls")
        return cursor.fetchone()[0]


def _read(one: Call):  # type: ignore[no-untyped-def]
    outcome, follow_ups = readonly.execute_read(one)
    return outcome, follow_ups


def test_a_read_answers_from_a_read_only_snapshot_and_leaves_no_record(users):
    owner, _ = users
    Probe.call(owner, "bump")
    before = _records(owner)
    seen = Probe.call(owner, "peek")
    assert seen["user"] == owner and seen["count"] == 2
    assert seen["search_path"].startswith(schema_name_for(owner))
    assert (seen["read_only"], seen["isolation"]) == ("on", "repeatable read")
    assert seen["xid"] is None  # nothing to commit: no transaction id was ever assigned
    assert _records(owner) == before


def test_a_read_does_not_wait_for_the_queue(users, settings):
    """Queue mode with no shard worker running: a write would time out, a read answers."""
    owner, _ = users
    settings.KODY_ACTORS_INLINE = False
    clear_actor_queues()
    assert Probe.call(owner, "peek", timeout=1)["count"] == 1
    with pytest.raises(TimeoutError):
        Probe.call(owner, "bump", timeout=0.5)
    clear_actor_queues()


def test_a_read_does_not_wait_for_the_owner_lock(users, settings):
    owner, _ = users
    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 300
    with owner_lock_held(owner):
        # The holder's uncommitted bump is not in the snapshot; nothing waited for it.
        assert Probe.call(owner, "peek")["count"] == 1


def test_another_users_schema_is_refused_and_shows_nothing(users):
    owner, outsider = users
    for _ in range(3):
        Probe.call(owner, "bump")
    outcome, _ = _read(call(outsider, "peek", schema_of=owner))
    with pytest.raises(OwnerMismatch):
        outcome.unwrap()
    assert Probe.call(outsider, "peek")["count"] == 1  # their own only
    assert Probe.call(owner, "peek")["count"] == 4


def test_a_write_inside_a_read_fails_and_changes_nothing(users):
    owner, _ = users
    with pytest.raises(DatabaseError, match="read-only transaction"):
        Probe.call(owner, "peek_then_write")
    assert Probe.call(owner, "peek")["count"] == 1


def test_an_account_marked_for_deletion_gets_only_its_deletion_safe_reads(users):
    owner, _ = users
    mark_deleting(owner)
    try:
        with pytest.raises(AccountDeleting):
            Probe.call(owner, "peek")
        assert Probe.call(owner, "peek_safe") == 1
    finally:
        unmark_deleting(owner)


def test_inside_a_callers_transaction_a_read_sees_its_writes_and_gives_it_back_intact(users):
    owner, other = users
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('search_path')")
        path = cursor.fetchone()[0]
    with transaction.atomic():
        Probe.call(owner, "bump")  # inline: uncommitted, in this transaction
        assert Probe.call(owner, "peek")["count"] == 2
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('transaction_read_only'), current_setting('search_path')"
            )
            assert cursor.fetchone() == ("off", path)
        Probe.call(other, "bump")  # the caller can still write afterwards
    assert Probe.call(owner, "peek")["count"] == 2
    assert Probe.call(other, "peek")["count"] == 2


def test_housekeeping_a_read_asks_for_reaches_the_writer_after_it(users):
    owner, _ = users
    outcome, follow_ups = _read(call(owner, "peek_and_tidy"))
    assert outcome.unwrap() == 1 and follow_ups == [("bump", {})]  # nothing written by the read
    assert Probe.call(owner, "peek_and_tidy") == 1  # through call(): the bump is cast after
    assert Probe.call(owner, "peek")["count"] == 2


def test_a_read_is_never_cast(users):
    owner, _ = users
    with pytest.raises(TypeError, match="only reads"):
        Probe.cast(owner, "peek")


def test_a_read_finds_a_schema_hibernated_under_its_cache(users):
    owner, _ = users
    entry = known.entry(owner)
    assert entry is not None and hibernate_schema(owner) is not None
    known.add(owner, *entry)  # this process still believes the schema is there
    assert Probe.call(owner, "peek")["count"] == 1  # looked again: restored, then read


@pytest.mark.parametrize("read_first", [False, True])
def test_a_read_nested_in_a_shard_batch_leaves_the_batch_where_it_was(users, read_first):
    """A write in a batch of two users (one transaction, each user's search path switched
    with its first statement) reads the other user before its first statement or between
    two: the read's savepoint is rolled back, and every write lands in its own schema."""
    owner, other = users
    first, second = execute(
        [
            call(owner, "bump_around_a_read", other, read_first=read_first),
            call(other, "bump_around_a_read", owner, read_first=read_first),
        ]
    )
    assert first.unwrap() == {"first": 2, "other": 1, "second": 3}
    assert second.unwrap() == {"first": 2, "other": 3, "second": 3}
    assert Probe.call(owner, "peek")["count"] == 3 and Probe.call(other, "peek")["count"] == 3
