"""Calls left on shards beyond ``KODY_ACTOR_SHARDS``, found and moved to the shards that own
their users now.

Design note. A user's shard is ``shard_for(user_id)``, the hash modulo the shard count, so
lowering the count leaves shards no worker drains any more. Anything still on them
— calls queued, calls a consumer took and never answered (its in-flight list) — would wait
there for ever. ``stranded()`` finds them: every shard the database has an epoch row for
(each shard that was ever consumed has one) plus every shard number below ``PROBED``, at or
beyond the count, with a queue or in-flight list that is not empty. The health page lists
them and a shard worker logs them when it starts.

``move(shard)`` empties one such shard onto the current ones: oldest first, the in-flight
calls (taken before anything still queued) and then the queue, each pushed onto its user's
shard now and only then removed from the old list, by a script that removes it only if it is
still the oldest there and no consumer holds the old shard's lease. A crash between the two
steps leaves the call on both lists: it runs once and is answered from its record the second
time (at-least-once delivery, exactly-once effect, as for any redelivery). Each user's calls
keep their order among themselves; against calls the user made on the new shard since the
change they are not ordered (the runbook says to stop callers first for that). Each step
touches one shard's keys only, so it runs the same on Redis Cluster. A caller still waiting
on a moved call's reply waits on the old shard's reply key and times out; its retry with the
same key is answered from the record.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from django.conf import settings
from django.db import DatabaseError

from kody.actors import transport
from kody.actors.fence import ShardEpoch
from kody.actors.wire import Call

log = logging.getLogger("kody.actors.worker")

# Shard numbers below this are always looked at, epoch row or not (a shard that callers
# pushed to but no worker ever drained has none).
PROBED = 64

# KEYS: the old list, the old shard's lease. ARGV: the item expected at the list's oldest end.
# 1: removed; 0: the oldest is another item now (someone else moved or took it); -1: leased.
_REMOVE_OLDEST = """
if redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
if redis.call('LINDEX', KEYS[1], -1) ~= ARGV[1] then return 0 end
redis.call('RPOP', KEYS[1])
return 1
"""


class ShardLeased(Exception):
    """A consumer holds the stranded shard's lease: a worker still runs with the old count."""


@dataclass(frozen=True)
class ShardState:
    """What is on one shard, read from the broker (content-free: counts only)."""

    shard: int
    depth: int  # calls queued
    inflight: int  # calls taken and not yet answered
    consumer: bool  # a consumer holds its lease

    @property
    def queue(self) -> str:
        return transport.queue_name(self.shard)

    def row(self) -> dict[str, object]:
        """As the health page lists it."""
        return {
            "queue": self.queue,
            "depth": self.depth,
            "inflight": self.inflight,
            "consumer": self.consumer,
        }


def states(shards: Iterable[int], client: object | None = None) -> list[ShardState]:
    """Each shard's queue depth, in-flight count and lease, in one pipeline."""
    redis_client = client if client is not None else transport.client()
    shards = list(shards)
    pipe = redis_client.pipeline(transaction=False)  # type: ignore[attr-defined]
    for shard in shards:
        pipe.llen(transport.queue_key(shard))
        pipe.llen(transport.inflight_key(shard))
        pipe.exists(transport.lease_key(shard))
    replies = pipe.execute()
    return [
        ShardState(shard, int(replies[i * 3]), int(replies[i * 3 + 1]), bool(replies[i * 3 + 2]))
        for i, shard in enumerate(shards)
    ]


def candidates() -> list[int]:
    """Shard numbers at or beyond the count that may hold calls: the probed range, and every
    shard with an epoch row (the probed range alone while the database cannot be read, so
    the health page's queue section still reports)."""
    count = settings.KODY_ACTOR_SHARDS
    try:
        seen = set(ShardEpoch.objects.filter(shard__gte=count).values_list("shard", flat=True))
    except DatabaseError:
        log.warning("stranded shards: epoch rows unreadable; looking below %d only", PROBED)
        seen = set()
    return sorted(seen | set(range(count, max(count, PROBED))))


def stranded(client: object | None = None) -> list[ShardState]:
    """The shards beyond the count with calls on them, in shard order (``consumer``: a
    worker on the old count still holds one)."""
    return [each for each in states(candidates(), client) if each.depth or each.inflight]


@dataclass
class Moved:
    calls: int = 0
    malformed: int = 0
    to: dict[int, int] = field(default_factory=dict)  # calls moved onto each current shard


def move(shard: int, *, progress: Callable[[int], None] | None = None) -> Moved:
    """Move every call on ``shard`` (which must be beyond the count) to its user's shard now;
    ``progress(moved so far)`` after each call. ``ShardLeased`` if a consumer holds the
    shard (nothing more is moved; what moved already stays moved). A message that is not a
    call is dropped, as a consumer drops it, and counted."""
    if shard < settings.KODY_ACTOR_SHARDS:
        raise ValueError(
            f"shard {shard} is a current shard (KODY_ACTOR_SHARDS={settings.KODY_ACTOR_SHARDS})"
        )
    client = transport.client()
    remove = client.register_script(_REMOVE_OLDEST)
    lease = transport.lease_key(shard)
    done = Moved()
    for source in (transport.inflight_key(shard), transport.queue_key(shard)):
        while True:
            if client.exists(lease):
                raise ShardLeased(f"{transport.queue_name(shard)} has a consumer")
            oldest = client.lindex(source, -1)
            if oldest is None:
                break
            target = _target(oldest)
            if target is not None:
                # Pushed before it is removed: a crash in between leaves it on both lists.
                client.lpush(transport.queue_key(target), oldest)
            removed = int(remove(keys=[source, lease], args=[oldest]))
            if removed == -1:
                raise ShardLeased(f"{transport.queue_name(shard)} has a consumer")
            if target is None:
                done.malformed += removed
                if removed:
                    log.error(
                        "shard %s: dropped a malformed message (%d bytes)", shard, len(oldest)
                    )
                continue
            # removed == 0: another mover took it first; the copy pushed is a redelivery.
            done.calls += 1
            done.to[target] = done.to.get(target, 0) + 1
            if progress is not None:
                progress(done.calls)
    return done


def _target(raw: bytes) -> int | None:
    try:
        call = Call.decode(raw)
    except (ValueError, KeyError, TypeError):
        return None
    return transport.shard_for(call.user_id)
