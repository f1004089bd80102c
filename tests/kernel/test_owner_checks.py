"""Only the owner's calls run, on either path: a call aimed at another user's schema (or at a
schema whose owner row is gone) is refused, unrecorded, and changes nothing; while a user is
marked for deletion only ``@deletion_safe`` methods run; a held owner row costs the one user
behind it one ``lock_timeout`` and the rest of the batch nothing; a shard consumer that lost
its shard commits nothing.
"""

from __future__ import annotations

import dataclasses

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import ActorUnavailable, OwnerMismatch, fence
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.errors import AccountDeleting
from kody.userschema.naming import quoted, schema_name_for
from kody.userschema.schemas import mark_deleting, unmark_deleting
from tests.kernel.probes import counter, metered_users, owner_lock_held, probe_call

pytestmark = pytest.mark.django_db(transaction=True)

# A fixed day long past: a charge prunes the counter rows more than a week older than its
# day, and Probe's counter (today's row) must outlive the charges.
DAY = "2001-07-04"
RESOURCE = "execute_calls_per_day"
SPARE_SHARD = 62  # a shard no worker of these tests consumes


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


def recorded(user: str, call_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {quoted(schema_name_for(user))}.actor_calls WHERE id = %s", [call_id]
        )
        return cursor.fetchone() is not None


def forged(call: Call, owner: str) -> Call:
    return dataclasses.replace(call, schema=schema_name_for(owner))


@pytest.mark.parametrize("path", ["one-statement", "plain"])
def test_a_call_into_another_users_schema_is_refused_and_the_rest_run(users, path):
    owner, outsider, third = users
    make = charge if path == "one-statement" else (lambda user: probe_call(user, "bump"))
    before = [counter(owner), counter(third)]
    attack = forged(make(outsider), owner)
    refused, ran = execute([attack, make(third)])
    with pytest.raises(OwnerMismatch):
        refused.unwrap()
    assert refused.recordable is False and ran.ok
    assert not recorded(owner, attack.id) and not recorded(outsider, attack.id)
    assert count(owner) == 1 and count(outsider) == 1
    assert counter(owner) == before[0] + 1  # nothing of the forged call applied
    assert execute([attack])[0].ok is False  # refused again, alone


@pytest.mark.parametrize("path", ["one-statement", "plain"])
def test_a_schema_without_its_owner_row_runs_nothing(users, path):
    a, b, _ = users
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {quoted(schema_name_for(a))}.actor_owner")
    make = charge if path == "one-statement" else (lambda user: probe_call(user, "bump"))
    refused, ran = execute([make(a), make(b)])
    with pytest.raises(OwnerMismatch):
        refused.unwrap()
    assert ran.ok


@pytest.mark.parametrize("path", ["one-statement", "plain"])
def test_a_user_marked_for_deletion_runs_only_deletion_safe_methods(users, path):
    a, b, _ = users
    make = charge if path == "one-statement" else (lambda user: probe_call(user, "bump"))
    denied = make(b)
    mark_deleting(b)
    try:
        ran, refused, safe = execute(
            [make(a), denied, probe_call(b, "list_write_leases", actor=UserMeter.name)]
        )
    finally:
        unmark_deleting(b)
    assert ran.ok and safe.unwrap() == []
    with pytest.raises(AccountDeleting):
        refused.unwrap()
    assert refused.recordable is False and not recorded(b, denied.id)
    assert count(b) == 1


def test_a_held_owner_row_costs_only_its_user_one_lock_timeout(users, settings):
    a, b, c = users
    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 200
    with owner_lock_held(b):
        outcomes = execute([charge(a), charge(b), charge(c)])
        with pytest.raises(ActorUnavailable) as alone:
            execute([charge(b)])[0].unwrap()
    with pytest.raises(ActorUnavailable) as refused:
        outcomes[1].unwrap()
    assert refused.value.details == alone.value.details == {"reason": "lock_timeout"}
    assert [outcomes[0].unwrap()["count"], outcomes[2].unwrap()["count"]] == [2, 2]
    assert [count(a), count(b), count(c)] == [2, 1, 2]


@pytest.mark.parametrize("path", ["one-statement", "plain", "no statement"])
def test_a_consumer_that_lost_its_shard_commits_nothing(users, path):
    a, b, _ = users
    makes = {
        "one-statement": charge,
        "plain": lambda user: probe_call(user, "bump"),
        "no statement": lambda user: probe_call(user, "slow_echo", "x", 0),
    }
    batch = [makes[path](a), makes[path](b)]
    before = [counter(a), counter(b)]
    epoch = fence.floor(SPARE_SHARD) + 1
    assert fence.claim(SPARE_SHARD, epoch)
    assert fence.claim(SPARE_SHARD, epoch + 1)  # a successor took the shard
    with fence.holding(fence.Fence(SPARE_SHARD, epoch)), pytest.raises(fence.FenceLost):
        execute(batch)
    assert not recorded(a, batch[0].id) and not recorded(b, batch[1].id)
    assert [count(a), count(b)] == [1, 1]
    assert [counter(a), counter(b)] == [before[0] + 1, before[1] + 1]
