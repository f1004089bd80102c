"""The shard fence: a per-shard epoch that only grows, checked by Redis and by Postgres.

Design note. A shard consumer holds a lease in Redis; a lease can expire under a consumer
that is still running (a long pause, a stalled host). Whoever takes the lease next gets a new
epoch, one higher than any before it, and writes it into ``kody_actor_shard_epochs`` before
it touches the shard. From then on:

* every in-flight operation in Redis (take, replay, answer-and-delete, renew) is a Lua script
  that first checks the lease still holds the consumer's token and the epoch key its epoch
  (``kody.actors.worker``);
* every batch transaction ends with :func:`guard`: a statement that locks the shard's epoch
  row if it still holds the consumer's epoch and fails otherwise, sent before COMMIT (in the
  same round trip: the COMMIT only runs if it passed). A consumer that lost its shard raises
  :class:`FenceLost` there, so its transaction rolls back. The row lock orders the two
  consumers: the successor's epoch write waits for an old batch that passed the check to
  commit (its replay then finds the records), or the old batch sees the new epoch and
  rolls back.

So a consumer that lost its shard can neither commit, take, answer, nor delete anything.

The row also names the owner's database session (backend pid and start time). A consumer
paused in the middle of a transaction keeps its row locks (and a paused psycopg pipeline is
not even "idle in transaction" to Postgres), so the successor ends that session before it
claims the shard: the paused batch rolls back at once instead of blocking its users.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, models

from kody.actors.errors import ActorError

log = logging.getLogger("kody.actors.worker")


class ShardEpoch(models.Model):
    """The epoch of the consumer that currently owns each shard (public, no user data)."""

    shard = models.IntegerField(primary_key=True)
    epoch = models.BigIntegerField()
    backend_pid = models.IntegerField(null=True)
    backend_start = models.DateTimeField(null=True)

    class Meta:
        app_label = "kody"
        db_table = "kody_actor_shard_epochs"

    def __str__(self) -> str:
        return f"shard {self.shard} @ {self.epoch}"


class FenceLost(ActorError):
    """This consumer no longer owns its shard: a newer epoch took over. Nothing it ran in the
    current transaction may commit."""


@dataclass(frozen=True)
class Fence:
    shard: int
    epoch: int


_current: contextvars.ContextVar[Fence | None] = contextvars.ContextVar(
    "kody_actor_fence", default=None
)


@contextlib.contextmanager
def holding(fence: Fence) -> Iterator[None]:
    """Run the enclosed batch under ``fence``: each transaction it commits is checked."""
    token = _current.set(fence)
    try:
        yield
    finally:
        _current.reset(token)


# SQLSTATE division_by_zero: what the guard raises when the epoch is not this consumer's.
_GUARD_FAILED = "22012"


def guard() -> tuple[str, tuple[()]] | None:
    """The fence check as one statement that fails unless this consumer's epoch is still the
    shard's, locking the shard's row (``FOR UPDATE``) when it is: it can go out with the
    batch's last writes and its COMMIT in one round trip (``kody.actors.records``), and an
    error there means the COMMIT never runs. Turn the error into FenceLost with :func:`lost`.
    None outside a shard consumer.

    Under READ COMMITTED a claim updating the row first makes this wait, then re-read the row
    (its new epoch no longer matches: zero rows), exactly like the compare it replaces."""
    fence = _current.get()
    if fence is None:
        return None
    # Two integers written as literals: no parameter to bind client-side.
    return (
        "SELECT 1 / count(*) FROM (SELECT 1 FROM kody_actor_shard_epochs"
        f" WHERE shard = {int(fence.shard)} AND epoch = {int(fence.epoch)} FOR UPDATE) AS held",
        (),
    )


def lost(exc: BaseException) -> FenceLost | None:
    """The FenceLost a failed :func:`guard` stands for (None for any other error)."""
    fence = _current.get()
    cause = exc.__cause__ if exc.__cause__ is not None else exc
    if fence is None or getattr(cause, "sqlstate", None) != _GUARD_FAILED:
        return None
    return FenceLost(f"shard {fence.shard}: epoch {fence.epoch} superseded")


def floor(shard: int, using: str = DEFAULT_DB_ALIAS) -> int:
    """The highest epoch the database has seen for ``shard`` (0 if none)."""
    with connections[using].cursor() as cursor:
        cursor.execute("SELECT epoch FROM kody_actor_shard_epochs WHERE shard = %s", [shard])
        row = cursor.fetchone()
    return 0 if row is None else int(row[0])


_SESSION = (
    "pg_backend_pid(), (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())"
)


def claim(shard: int, epoch: int, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Record ``epoch`` (and this session) as the shard's owner if it is newer than what the
    database holds, after ending the previous owner's session. False if a newer epoch is
    already there."""
    with connections[using].cursor() as cursor:
        try:
            cursor.execute(
                "SELECT pg_terminate_backend(a.pid, 5000) FROM kody_actor_shard_epochs e"
                " JOIN pg_stat_activity a"
                " ON a.pid = e.backend_pid AND a.backend_start = e.backend_start"
                " WHERE e.shard = %s AND e.epoch < %s AND a.pid <> pg_backend_pid()",
                [shard, epoch],
            )
        except DatabaseError:
            # Not allowed to signal it (another role): the claim below waits for its locks.
            log.warning("shard %s: could not end the previous owner's session", shard)
        cursor.execute(
            "INSERT INTO kody_actor_shard_epochs (shard, epoch, backend_pid, backend_start)"
            f" VALUES (%s, %s, {_SESSION}) ON CONFLICT (shard) DO UPDATE"
            " SET epoch = EXCLUDED.epoch, backend_pid = EXCLUDED.backend_pid,"
            " backend_start = EXCLUDED.backend_start"
            " WHERE kody_actor_shard_epochs.epoch < EXCLUDED.epoch RETURNING epoch",
            [shard, epoch],
        )
        return cursor.fetchone() is not None


def register_session(shard: int, epoch: int, using: str = DEFAULT_DB_ALIAS) -> None:
    """The owner reconnected: name its new session so a successor can end it."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"UPDATE kody_actor_shard_epochs SET (backend_pid, backend_start) = ({_SESSION})"
            " WHERE shard = %s AND epoch = %s",
            [shard, epoch],
        )
