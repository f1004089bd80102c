"""What this process remembers about user schemas: the ones it has seen at the current
version (a bounded LRU, so a warm call skips the registry), and the day each user was last
stamped active (hibernation picks idle users by it)."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict

from django.db import connections, transaction
from django.utils import timezone

from kody.userschema.models import UserSchema

REGISTRY = UserSchema._meta.db_table


class _KnownSchemas:
    """Schemas this process has seen at the current version, with the table sets they hold
    (None: all), as a bounded LRU."""

    def __init__(self, size: int = 100_000) -> None:
        self._size = size
        # user id -> (schema, table sets or None for all, the day it was last stamped active)
        self._items: OrderedDict[str, tuple[str, frozenset[str] | None, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, user_id: str) -> str | None:
        entry = self.entry(user_id)
        return None if entry is None else entry[0]

    def entry(self, user_id: str) -> tuple[str, frozenset[str] | None, int] | None:
        with self._lock:
            entry = self._items.get(user_id)
            if entry is not None:
                self._items.move_to_end(user_id)
            return entry

    def add(
        self, user_id: str, schema: str, sets: frozenset[str] | None = None, day: int = -1
    ) -> None:
        with self._lock:
            self._items[user_id] = (schema, sets, day)
            self._items.move_to_end(user_id)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def forget(self, user_id: str) -> None:
        with self._lock:
            self._items.pop(user_id, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


known = _KnownSchemas()


def _remember_after_commit(
    user_id: str,
    schema: str,
    using: str,
    sets: list[str] | frozenset[str] | None = None,
    day: int = -1,
) -> None:
    # A rolled-back creation (e.g. inside a caller's failed transaction) must not be cached.
    frozen = None if sets is None else frozenset(sets)
    transaction.on_commit(lambda: known.add(user_id, schema, frozen, day), using=using)


def _today() -> int:
    """The app clock's UTC day number (cheap enough for the hot path)."""
    return int(time.time() // 86400)


def _stamp_active(user_id: str, using: str) -> int:
    """Record that the user was active today (hibernation picks idle users by it); once a
    day per user per process. Inside a caller's transaction it is left for a later call:
    updating the registry row before the call locks its owner row would invert the lock
    order."""
    if connections[using].in_atomic_block:
        return -1
    day = timezone.now().date()
    with connections[using].cursor() as cursor:
        # SKIP LOCKED: never wait behind a call holding the row (set_alarm); try again later.
        cursor.execute(
            f"WITH due AS (SELECT user_id FROM {REGISTRY} WHERE user_id = %s"
            " AND (active_on IS NULL OR active_on < %s) FOR UPDATE SKIP LOCKED)"
            f" UPDATE {REGISTRY} r SET active_on = %s FROM due WHERE r.user_id = due.user_id"
            f" RETURNING 1",
            [user_id, day, day],
        )
        stamped = cursor.fetchone() is not None
        if not stamped:
            cursor.execute(
                f"SELECT 1 FROM {REGISTRY} WHERE user_id = %s AND active_on >= %s", [user_id, day]
            )
            stamped = cursor.fetchone() is not None
    return _today() if stamped else -1
