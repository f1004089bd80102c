"""One user's calls off the queue: the optimistic prelude with a record check (ADR 0033).

A shard's one-user batch (and an inline call with an idempotency key) may repeat a call that
already ran: a redelivery after a crash, a retry with the caller's key. Its prelude goes out
with the first method's first statement like a fresh call's (ADR 0027) and carries one more
failing check, after the owner lock: no call of the batch has a record. A batch that has one
falls back to the plain path, which answers it from its record. These tests pin the round
trips and that a redelivery, a mixed batch, a failing method and ids the prelude cannot write
as literals all end as on the plain path: every call applied once, answered in order.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kody.actors import OwnerMismatch, fence
from kody.actors.runtime import execute
from kody.actors.wire import Call
from tests.kernel.probes import counter, prelude_paths, sent_with_the_prelude
from tests.kernel.probes import probe_call as call
from tests.kernel.sample_actors import ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    with prelude_paths(monkeypatch, "optimistic") as seen:
        yield seen


def values(outcomes) -> list:  # type: ignore[no-untyped-def]
    return [outcome.unwrap() for outcome in outcomes]


def test_a_one_user_batch_sends_no_prelude_of_its_own(users, paths):
    a, _ = users
    batch = [call(a, "rows_touched") for _ in range(3)]  # two statements each
    paths["queries"] = 0
    assert [each["touched"] for each in values(execute(batch))] == [1, 1, 1]
    assert paths == {"optimistic": 1, "fell_back": 0, "queries": 3 * 2 + 1}  # + the records'


def test_a_redelivered_batch_answers_from_its_records(users, paths):
    a, _ = users
    before = counter(a)
    batch = [call(a, "bump") for _ in range(3)]
    assert values(execute(batch)) == [before + 2, before + 3, before + 4]
    assert paths["fell_back"] == 0
    assert values(execute(batch)) == [before + 2, before + 3, before + 4]  # replayed
    assert paths["fell_back"] == 1
    assert counter(a) == before + 4  # the replay applied nothing


def test_a_batch_with_one_recorded_call_runs_only_the_others(users, paths):
    a, _ = users
    before = counter(a)
    done = call(a, "bump")
    assert execute([done])[0].unwrap() == before + 2
    batch = [call(a, "bump"), done, call(a, "bump")]
    assert values(execute(batch)) == [before + 3, before + 2, before + 4]
    assert counter(a) == before + 4


def test_a_failing_method_is_recorded_and_its_neighbours_commit(users, paths):
    a, _ = users
    before = counter(a)
    batch = [call(a, "bump"), call(a, "fail", "no"), call(a, "bump")]
    first, failed, last = execute(batch)
    with pytest.raises(ProbeFailed):
        failed.unwrap()
    assert (first.unwrap(), last.unwrap()) == (before + 2, before + 3)
    assert paths["fell_back"] == 1
    assert counter(a) == before + 3  # the failed call's own bump rolled back
    replay = execute(batch)  # all three answer from their records, the error included
    with pytest.raises(ProbeFailed):
        replay[1].unwrap()
    assert counter(a) == before + 4


def test_ids_it_cannot_write_as_literals_and_a_repeated_id_take_the_plain_path(users, paths):
    a, _ = users
    before = counter(a)
    odd = Call(**{**vars(call(a, "bump")), "id": "it's~a%key"})
    twice = call(a, "bump")
    assert values(execute([odd, twice, twice])) == [before + 2, before + 3, before + 3]
    assert paths["optimistic"] == 1  # counter()'s only
    assert counter(a) == before + 3
    assert execute([odd])[0].unwrap() == before + 2  # answered from its record


def test_a_forged_owner_is_refused_before_any_statement_of_the_batch(users, paths):
    a, b = users
    before = counter(a)
    batch = [call(b, "bump", schema_of=a), call(b, "bump", schema_of=a)]
    for outcome in execute(batch):
        with pytest.raises(OwnerMismatch):
            outcome.unwrap()
    assert counter(a) == before + 1


def test_the_record_check_follows_the_owner_lock(users, settings):
    settings.KODY_ACTOR_PREPARED_MAX = 0  # the plain text (prepared: test_prepared_batches)
    a, _ = users
    one = call(a, "rows_touched")
    with sent_with_the_prelude() as sent:
        assert execute([one])[0].unwrap()["touched"] == 1
    first = sent[0].split(";\n")
    assert first[0] == "BEGIN"
    assert "actor_owner" in first[2] and "FOR UPDATE" in first[2]
    # The tombstone and the record check: two reads after the lock, in one statement.
    assert "deleting_at" in first[3]
    assert "actor_calls" in first[3] and f"'{one.id}'" in first[3]
    assert first[4].startswith("UPDATE daily_counters")


def test_a_recorded_call_that_sends_no_statement_is_no_fence_loss(users, paths):
    # Its prelude rides on the records' query with the fence guard; the record check fails
    # there with the guard's error, and must be told apart from a lost shard.
    a, _ = users
    shard = 97  # no consumer of the tests uses it
    epoch = fence.floor(shard) + 1
    assert fence.claim(shard, epoch)
    one = call(a, "slow_echo", "x", 0)
    with fence.holding(fence.Fence(shard, epoch)):
        first = execute([one])[0].unwrap()
        assert execute([one])[0].unwrap() == first  # answered from its record
    assert paths["fell_back"] == 1
