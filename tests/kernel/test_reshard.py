"""Calls left on shards beyond ``KODY_ACTOR_SHARDS`` are found and moved (ADR 0041).

Lowering the shard count leaves shards no worker drains. ``kody.actors.reshard`` finds what
is on them (health page, worker start-up) and ``manage.py move_stranded_shards`` moves it,
oldest first, onto the shards the users hash to now, where a real worker runs it.
"""

from __future__ import annotations

import time
import uuid
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from kody.actors import reshard, transport
from kody.actors.fence import ShardEpoch
from kody.actors.wire import Call
from kody.userschema.naming import schema_name_for
from tests.kernel.conftest import clear_actor_queues, new_user_id
from tests.kernel.sample_actors import Probe

OLD = 3  # a shard of the old count (4), beyond the new one (2)


def bump(user: str, *, reply: bool = False) -> Call:
    return Call(
        id=uuid.uuid4().hex,
        user_id=user,
        schema=schema_name_for(user),
        actor=Probe.name,
        method="bump",
        reply=reply,
    )


@pytest.fixture
def broker(settings):  # type: ignore[no-untyped-def]
    settings.KODY_ACTOR_SHARDS = 2
    clear_actor_queues()
    yield transport.client()
    clear_actor_queues()


def strand(client, shard: int, queued: list[Call], taken: list[Call] = ()) -> None:  # type: ignore[no-untyped-def,assignment]
    """Leave calls on ``shard`` the way callers and a consumer leave them: pushed on the left,
    and taken (moved to the in-flight list, oldest at its right end) but never answered."""
    for call in [*taken, *queued]:
        client.lpush(transport.queue_key(shard), call.encode())
    for _ in taken:
        client.lmove(transport.queue_key(shard), transport.inflight_key(shard), "RIGHT", "LEFT")


def oldest_first(client, shard: int) -> list[str]:  # type: ignore[no-untyped-def]
    newest_first = client.lrange(transport.queue_key(shard), 0, -1)
    return [Call.decode(raw).id for raw in reversed(newest_first)]


def test_stranded_calls_move_oldest_first_onto_their_users_shards_now(broker, db):
    users = [f"{n:064x}" for n in range(40)]
    a = next(u for u in users if transport.shard_for(u) == 0)
    b = next(u for u in users if transport.shard_for(u) == 1)
    taken = [bump(a), bump(b)]
    queued = [bump(b), bump(a), bump(a)]
    strand(broker, OLD, queued, taken)
    broker.lpush(transport.queue_key(OLD), b"not a call")  # newest; dropped, counted

    assert reshard.stranded() == [reshard.ShardState(OLD, depth=4, inflight=2, consumer=False)]
    seen: list[int] = []
    moved = reshard.move(OLD, progress=seen.append)

    assert (moved.calls, moved.malformed, moved.to) == (5, 1, {0: 3, 1: 2})
    assert seen == [1, 2, 3, 4, 5]
    # In flight first (taken before anything still queued), then the queue, each oldest first.
    assert oldest_first(broker, 0) == [taken[0].id, queued[1].id, queued[2].id]
    assert oldest_first(broker, 1) == [taken[1].id, queued[0].id]
    assert broker.llen(transport.queue_key(OLD)) == 0
    assert broker.llen(transport.inflight_key(OLD)) == 0
    assert reshard.stranded() == []


def test_a_current_shard_is_never_moved(broker, db):
    with pytest.raises(ValueError, match="current shard"):
        reshard.move(1)


def test_a_shard_a_worker_still_consumes_is_refused_and_keeps_its_calls(broker, db):
    user = f"{7:064x}"
    calls = [bump(user), bump(user)]
    strand(broker, OLD, calls)
    broker.set(transport.lease_key(OLD), "a worker on the old count")
    assert reshard.stranded()[0].consumer is True

    with pytest.raises(reshard.ShardLeased):
        reshard.move(OLD)
    assert oldest_first(broker, OLD) == [call.id for call in calls]
    assert broker.llen(transport.queue_key(transport.shard_for(user))) == 0

    out = StringIO()
    with pytest.raises(CommandError, match="still consumes"):
        call_command("move_stranded_shards", stdout=out)
    assert oldest_first(broker, OLD) == [call.id for call in calls]


def test_a_far_shard_is_found_by_its_epoch_row(broker, db):
    far = reshard.PROBED + 6
    strand(broker, far, [bump(f"{9:064x}")])
    assert reshard.stranded() == []  # beyond the probed range and never consumed: not looked at
    ShardEpoch.objects.create(shard=far, epoch=3)
    assert reshard.stranded() == [reshard.ShardState(far, depth=1, inflight=0, consumer=False)]


def test_the_command_lists_moves_and_then_finds_nothing(broker, db):
    user = f"{11:064x}"
    strand(broker, OLD, [bump(user), bump(user)], [bump(user)])

    out = StringIO()
    call_command("move_stranded_shards", "--dry-run", stdout=out)
    assert out.getvalue().splitlines() == [
        "Would move 3 call(s) from 1 shard(s) beyond KODY_ACTOR_SHARDS=2.",
        "actors.shard-3: 2 queued, 1 in flight: would move",
    ]
    assert broker.llen(transport.queue_key(OLD)) == 2  # nothing moved

    out = StringIO()
    call_command("move_stranded_shards", stdout=out)
    target = transport.shard_for(user)
    lines = out.getvalue().splitlines()
    assert lines[0] == "Moving 3 call(s) from 1 shard(s) beyond KODY_ACTOR_SHARDS=2."
    assert lines[1:4] == [f"  actors.shard-3: {n}/3 moved" for n in (1, 2, 3)]
    assert lines[4:] == [
        f"actors.shard-3: 2 queued, 1 in flight: moved 3 (actors.shard-{target} 3)",
        "Moved 3 call(s).",
    ]
    assert broker.llen(transport.queue_key(target)) == 3

    out = StringIO()
    call_command("move_stranded_shards", stdout=out)
    assert out.getvalue() == "No calls stranded beyond shard 1 (KODY_ACTOR_SHARDS=2).\n"


@pytest.mark.queue
@pytest.mark.django_db(transaction=True)
def test_moved_calls_are_run_by_a_real_worker_once_each(settings, celery_worker):
    """End to end: a worker drains the current shards (2); calls stranded on shard 3, one of
    them taken and never answered, are run after the move, and a call moved twice (a mover
    that crashed between push and remove) still charges once."""
    assert settings.KODY_ACTOR_SHARDS == 2 == len(transport.all_queue_names())
    owner, outsider = new_user_id(), new_user_id()
    assert Probe.call(owner, "bump") == 1  # through the worker: schema and counter exist
    client = transport.client()
    calls = [bump(owner), bump(owner, reply=True)]
    strand(client, OLD, calls[1:], calls[:1])
    # The crashed mover's copy: already pushed onto the user's shard, still on the old one.
    client.lpush(transport.queue_key(transport.shard_for(owner)), calls[0].encode())
    time.sleep(0.3)
    assert Probe.call(owner, "peek")["count"] == 2  # the copy ran; the stranded ones wait

    call_command("move_stranded_shards", stdout=StringIO())
    deadline = time.monotonic() + 20
    while Probe.call(owner, "peek")["count"] < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # anything more would have run by now
    assert Probe.call(owner, "peek")["count"] == 3  # calls[0] once, calls[1] once
    assert Probe.call(outsider, "bump") == 1  # another user's counter is untouched
    assert reshard.stranded() == []


def test_an_unreadable_database_still_probes_the_shards_near_the_count(broker, db, monkeypatch):
    from django.db import DatabaseError

    strand(broker, OLD, [bump(f"{13:064x}")])

    def unreadable(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise DatabaseError("the database is down")

    monkeypatch.setattr(ShardEpoch.objects, "filter", unreadable)
    assert reshard.stranded() == [reshard.ShardState(OLD, depth=1, inflight=0, consumer=False)]
