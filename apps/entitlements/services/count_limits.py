"""Count limits (jobs, secrets, saved packages, repos, …) enforced atomically: ``count_limit``.

A count limit checked by counting and then inserting races with itself: twenty parallel
``jobSchedule`` calls each counted four jobs of five and each inserted one. Every writer that
adds rows of a counted resource therefore does it inside ``count_limit(user, resource)``::

    with count_limit(user, "secrets") as slot:
        slot.take(len(new_names))      # counts now, under the lock; LimitReached (429) if over
        ...insert the rows...          # in the same transaction

``count_limit`` opens a transaction (a savepoint inside one already open, e.g. an actor call's)
and takes a transaction-level advisory lock named by the resource and the owner
(``kody:count:{resource}:{userId}``). Every writer of that user's resource queues on the same
lock, and the lock is released only when the transaction that inserted commits or rolls back,
so the next writer's count already sees the rows. ``take`` counts (through
``counters.count``, on this same connection, after the lock) once per slot and refuses with
the usual ``limit_reached`` 429 — never a partial write: the caller raises before inserting
and the transaction rolls back. Other users and other resources never wait on it.

Rules for a new counted resource (repos, repo sessions, …): its count must be readable on the
same database connection inside the transaction (a public table in ``counters._TABLE_COUNTS``,
or from inside the owning actor's own call, where the actor's tables are on the search path);
every code path that inserts its rows takes the slot; deleting rows needs no slot. Documented
in docs/architecture.md ("Plan limits").
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connection, transaction

from apps.entitlements.plans import Kind, limit_for, resource
from apps.entitlements.services import counters
from apps.entitlements.services.enforcement import _limit_reached, user_id_of
from apps.entitlements.services.plan_cache import cached_plan


class CountSlot:
    """The owner's place in the queue for one counted resource, inside ``count_limit``."""

    def __init__(self, uid: str, name: str) -> None:
        self.uid = uid
        self.name = name
        self.taken = 0
        self._used: int | None = None

    @property
    def used(self) -> int:
        """The rows there are now (counted once, under the lock) plus those taken since."""
        if self._used is None:
            self._used = int(counters.count(self.uid, self.name) or 0)
        return self._used + self.taken

    def take(self, n: int = 1) -> None:
        """Room for ``n`` more rows, or ``LimitReached`` (nothing is taken then)."""
        if n <= 0:
            return
        plan = cached_plan(self.uid)
        limit = limit_for(plan, self.name)
        used = self.used
        if used + n > limit:
            raise _limit_reached(self.name, limit, plan, None, used)
        self.taken += n


@contextmanager
def count_limit(user: Any, name: str) -> Iterator[CountSlot]:
    """Hold the owner's lock for ``name`` for the rest of the enclosing transaction."""
    if resource(name).kind is not Kind.COUNT:
        raise ValueError(f"{name} is not a count limit")
    uid = user_id_of(user)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"kody:count:{name}:{uid}"],
            )
        yield CountSlot(uid, name)
