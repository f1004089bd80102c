"""A batch over several users: its prelude goes out with the first user's first statement
(ADR 0033, amendment).

The batch's ``BEGIN``, timeouts and checks — every owner row locked ``NOWAIT`` and equal to
its user, no tombstone on a user running a method that is not ``@deletion_safe``, no call
recorded — ride in front of the first method's first statement, as statements that fail
instead of rows read back; each next user's search path rides on that user's first
statement. Anything failing rolls the attempt back and the batch runs the plain way
(ADR 0022), which answers refusals and records. These tests pin the round trips, the order
of what is sent, and that every fallback ends as on the plain path: each call applied once,
refusals answered, the other users' calls run, a lost fence still raised.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.db import connection

from apps.entitlements.actor import UserMeter
from kody.actors import ActorUnavailable, OwnerMismatch, fence, runtime
from kody.actors.runtime import execute
from kody.actors.wire import Call
from kody.errors import AccountDeleting
from kody.userschema.naming import quoted, schema_name_for
from kody.userschema.schemas import mark_deleting, unmark_deleting
from tests.kernel import sample_actors
from tests.kernel.probes import (
    counter,
    owner_lock_held,
    prelude_paths,
    probed_users,
    sent_with_the_prelude,
)
from tests.kernel.probes import probe_call as call

pytestmark = pytest.mark.django_db(transaction=True)

SPARE_SHARD = 96  # an epoch row no consumer of the tests uses


@pytest.fixture
def users(user_schemas_cleanup: None, settings) -> list[str]:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    return probed_users(3)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    with prelude_paths(monkeypatch, "optimistic", runs="_run_fresh_batch") as seen:
        yield seen


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[str]]:
    """Which plain path the batch took after the optimistic attempt: its first attempt
    (``_batch_prelude``, the users it read) and its savepoint rerun (``_guarded``)."""
    seen: dict[str, list[str]] = {"first": [], "rerun": []}
    batch_prelude, guarded = runtime._batch_prelude, runtime._guarded

    def spy_prelude(groups, using):  # type: ignore[no-untyped-def]
        seen["first"] += [group.user_id for group in groups]
        return batch_prelude(groups, using)

    def spy_guarded(group, using):  # type: ignore[no-untyped-def]
        seen["rerun"].append(group.user_id)
        return guarded(group, using)

    monkeypatch.setattr(runtime, "_batch_prelude", spy_prelude)
    monkeypatch.setattr(runtime, "_guarded", spy_guarded)
    return seen


def values(outcomes) -> list:  # type: ignore[no-untyped-def]
    return [outcome.unwrap() for outcome in outcomes]


def test_a_batch_of_several_users_sends_no_prelude_of_its_own(users, paths, plain):
    batch = [call(user, "rows_touched") for user in users for _ in range(2)]  # two statements
    paths["queries"] = 0
    assert [each["touched"] for each in values(execute(batch))] == [1] * 6
    # The methods' statements and the records' query: one fewer than the plain path's
    # C + 2, whose prelude is a query of its own.
    assert paths == {"optimistic": 1, "fell_back": 0, "queries": 6 * 2 + 1}
    assert plain == {"first": [], "rerun": []}


def test_the_checks_precede_the_first_statement_and_each_user_gets_its_path(users, settings):
    # The prelude's plain text; with prepared statements the lock check is one statement a
    # user, each prepared once seen twice (tests/kernel/test_prepared_batches.py).
    settings.KODY_ACTOR_PREPARED_MAX = 0
    a, b, c = users
    batch = [call(c, "rows_touched"), call(a, "rows_touched"), call(b, "whoami")]
    with sent_with_the_prelude() as sent:
        touched_c, touched_a, seen_b = values(execute(batch))
    first = sent[0].split(";\n")
    assert first[0] == "BEGIN"
    assert f"'{schema_name_for(a)}, public'" in first[1] and "lock_timeout" in first[1]
    lock = first[2]  # one statement, every owner row, ascending user id
    schemas = [quoted(schema_name_for(user)) for user in users]
    assert lock.count("FOR UPDATE NOWAIT") == 3
    assert [lock.index(f"{schema}.actor_owner") for schema in schemas] == sorted(
        lock.index(f"{schema}.actor_owner") for schema in schemas
    )
    # The tombstones and the record check: reads after the locks, in one statement.
    assert "deleting_at" in first[3] and all(f"'{user}'" in first[3] for user in users)
    assert "actor_calls" in first[3] and all(f"'{each.id}'" in first[3] for each in batch)
    assert first[4].startswith("UPDATE daily_counters")  # a's (lowest id) own statement
    # b's first statement carries b's search path, then c's carries c's.
    switched = [sql.split(";\n")[0] for sql in sent[1:] if sql.startswith("SELECT set_config(")]
    assert switched == [
        f"SELECT set_config('search_path', '{schema_name_for(user)}, public', true)"
        for user in (b, c)
    ]
    assert seen_b["search_path"].startswith(schema_name_for(b))
    assert touched_a["search_path"].startswith(schema_name_for(a))
    assert touched_c["search_path"].startswith(schema_name_for(c))
    assert touched_a["touched"] == touched_c["touched"] == 1


def test_a_redelivered_batch_answers_from_its_records_and_applies_once(users, paths):
    a, b, c = users
    before = [counter(user) for user in users]
    batch = [call(a, "bump"), call(b, "bump"), call(a, "bump"), call(c, "bump")]
    expected = [before[0] + 2, before[1] + 2, before[0] + 3, before[2] + 2]
    assert values(execute(batch)) == expected
    assert paths["fell_back"] == 0
    assert values(execute(batch)) == expected  # redelivered
    assert paths == {"optimistic": 2, "fell_back": 1, "queries": paths["queries"]}
    # One recorded call among new ones, of another user: the new ones run once.
    mixed = [call(a, "bump"), batch[3], call(b, "bump")]
    assert values(execute(mixed)) == [before[0] + 4, before[2] + 2, before[1] + 3]
    assert paths["fell_back"] == 2
    assert [counter(user) for user in users] == [before[0] + 4, before[1] + 3, before[2] + 2]


@pytest.mark.parametrize("owner", ["foreign", "missing"])
def test_a_foreign_or_missing_owner_is_refused_and_the_others_run(users, paths, plain, owner):
    a, b, c = users
    before = [counter(user) for user in users]
    if owner == "foreign":
        refused = call(b, "bump", schema_of=c)  # b forging c's schema
    else:
        with connection.cursor() as cursor:
            cursor.execute(f"DELETE FROM {quoted(schema_name_for(b))}.actor_owner")
        refused = call(b, "bump")
    outcomes = execute([call(a, "bump"), refused, call(c, "bump")])
    with pytest.raises(OwnerMismatch):
        outcomes[1].unwrap()
    assert outcomes[1].recordable is False
    assert (outcomes[0].unwrap(), outcomes[2].unwrap()) == (before[0] + 2, before[2] + 2)
    assert paths["fell_back"] == 1
    assert plain["first"] and plain["rerun"] == []  # answered by the plain first attempt
    assert counter(a) == before[0] + 2 and counter(c) == before[2] + 2  # applied once


def test_the_prelude_passes_over_a_user_whose_methods_send_nothing(users, paths):
    # a's method sends no statement: the checks ride on b's first statement, after b's own
    # search path; b forges c's schema, so nothing of b's method may reach c's tables.
    a, b, c = users
    before = counter(c)
    echo, forged = execute([call(a, "slow_echo", "x", 0), call(b, "bump", schema_of=c)])
    assert echo.unwrap() == {"value": "x", "user": a}
    with pytest.raises(OwnerMismatch):
        forged.unwrap()
    assert paths["fell_back"] == 1
    assert counter(c) == before + 1


def test_a_marked_user_falls_back_and_only_its_deletion_safe_calls_run(users, paths, plain):
    a, b, c = users
    before = [counter(user) for user in users]
    mark_deleting(b)
    try:
        outcomes = execute(
            [
                call(a, "bump"),
                call(b, "bump"),  # refused, unrecorded
                call(b, "export_counters", actor=UserMeter.name),  # deletion-safe: runs
                call(c, "bump"),
            ]
        )
        assert paths["fell_back"] == 1 and plain["rerun"] == []
        # A marked user with deletion-safe calls only: the optimistic path goes through.
        safe = execute([call(a, "bump"), call(b, "export_counters", actor=UserMeter.name)])
        assert paths == {"optimistic": 2, "fell_back": 1, "queries": paths["queries"]}
    finally:
        unmark_deleting(b)
    with pytest.raises(AccountDeleting):
        outcomes[1].unwrap()
    assert outcomes[1].recordable is False
    assert outcomes[2].ok and safe[1].ok
    assert (outcomes[0].unwrap(), outcomes[3].unwrap(), safe[0].unwrap()) == (
        before[0] + 2,
        before[2] + 2,
        before[0] + 3,
    )
    assert [counter(user) for user in users] == [before[0] + 3, before[1] + 1, before[2] + 2]


def test_a_held_owner_row_fails_the_nowait_lock_and_only_that_user_waits(
    users, paths, plain, settings
):
    a, b, c = users
    before = [counter(user) for user in users]
    settings.KODY_ACTOR_LOCK_TIMEOUT_MS = 200
    with owner_lock_held(b):  # counts one bump of b's, committed when the block ends
        outcomes = execute([call(a, "bump"), call(b, "bump"), call(c, "bump")])
    with pytest.raises(ActorUnavailable) as refused:
        outcomes[1].unwrap()
    assert refused.value.details == {"reason": "lock_timeout"}
    assert (outcomes[0].unwrap(), outcomes[2].unwrap()) == (before[0] + 2, before[2] + 2)
    # NOWAIT failed at once; straight to the savepoint rerun, as the plain path's own
    # NOWAIT failure goes, without a second batch prelude that would fail the same way.
    assert paths["fell_back"] == 1
    assert plain == {"first": [], "rerun": users}
    assert [counter(user) for user in users] == [before[0] + 2, before[1] + 2, before[2] + 2]


def test_a_method_swallowing_the_prelude_error_still_falls_back(users, paths, plain):
    a, b, c = users
    before = counter(b)
    # a forges b's schema and is the batch's first user: its first statement carries the
    # checks, fails, and the method swallows the error and returns as if it had run.
    paths["queries"] = 0
    outcomes = execute([call(a, "swallow_first", schema_of=b), call(c, "bump")])
    with pytest.raises(OwnerMismatch):
        outcomes[0].unwrap()
    assert outcomes[1].ok
    # Told apart as the prelude's failure at once: nothing of the attempt after its one
    # query (c's statements), then the plain first attempt answers, no rerun: its prelude,
    # c's two statements (Probe's get_or_create and UPDATE), the records.
    assert paths["fell_back"] == 1
    assert paths["queries"] == 1 + 4
    assert plain["rerun"] == []
    assert counter(b) == before + 1
    assert values(execute([call(a, "swallow_first"), call(b, "bump")]))[0] == "ran"


def test_a_swallowed_prelude_error_stops_the_attempt_at_that_call(users, paths, monkeypatch):
    # a forges b's schema: its first call carries the checks, fails and swallows the error.
    # The attempt stops there, before a's next call runs its Python (the plain path then
    # refuses both of a's calls, nothing of them runs) and before c's.
    a, b, c = users
    monkeypatch.setattr(sample_actors, "notes", [])
    outcomes = execute(
        [
            call(a, "swallow_first", schema_of=b),
            call(a, "note", "a", schema_of=b),
            call(c, "note", "c"),
        ]
    )
    for refused in outcomes[:2]:
        with pytest.raises(OwnerMismatch):
            refused.unwrap()
    assert outcomes[2].unwrap() == "c"
    assert paths["fell_back"] == 1
    assert sample_actors.notes == ["c"]  # c's once, by the plain path; a's never


def test_a_superseded_epoch_still_raises_fence_lost(users):
    a, b, c = users
    before = [counter(user) for user in users]
    epoch = fence.floor(SPARE_SHARD) + 1
    assert fence.claim(SPARE_SHARD, epoch)
    assert fence.claim(SPARE_SHARD, epoch + 1)  # a successor took the shard
    with fence.holding(fence.Fence(SPARE_SHARD, epoch)):
        with pytest.raises(fence.FenceLost):
            execute([call(a, "bump"), call(b, "bump"), call(c, "bump")])
        # No method sends a statement: the prelude rides on the records' query with the
        # guard, whose failure looks like the checks'; the plain path raises it again.
        with pytest.raises(fence.FenceLost):
            execute([call(a, "slow_echo", "x", 0), call(b, "slow_echo", "y", 0)])
    assert [counter(user) - 1 for user in users] == before  # nothing committed
    with fence.holding(fence.Fence(SPARE_SHARD, epoch + 1)):
        echoes = [call(a, "slow_echo", "x", 0), call(b, "slow_echo", "y", 0)]
        first = values(execute(echoes))
        assert values(execute(echoes)) == first  # recorded: no fence loss either


def test_an_odd_id_takes_the_prelude_and_a_repeated_id_the_plain_path(users, paths):
    # Any call id is written by _literal (sixth pass, ADR 0036): quotes and % no longer keep
    # a batch off the prelude. An id twice in one batch still does: only the plain path
    # answers the second copy from the first's outcome.
    a, b, _ = users
    before = [counter(a), counter(b)]
    odd = Call(**{**vars(call(a, "bump")), "id": "it's~a%key"})
    twice = call(b, "bump")
    assert values(execute([odd, call(b, "bump")])) == [before[0] + 2, before[1] + 2]
    assert paths == {"optimistic": 1, "fell_back": 0, "queries": paths["queries"]}
    assert values(execute([call(a, "bump"), twice, twice])) == [
        before[0] + 3,
        before[1] + 3,
        before[1] + 3,
    ]
    assert paths["optimistic"] == 1
    assert values(execute([odd, call(b, "bump")])) == [before[0] + 2, before[1] + 4]
    assert paths == {"optimistic": 2, "fell_back": 1, "queries": paths["queries"]}
    assert [counter(a), counter(b)] == [before[0] + 3, before[1] + 4]
