"""Bounded backend memory: a shard consumer's database connection is recycled.

Design note. A Postgres backend caches the catalog entries (relcache, catcache) of every
relation it has touched and never gives them back. A shard consumer serves thousands of
users through one long-lived connection, each with its own schema of ~15-40 relations, so its
backend grows by tens of kilobytes per user it has ever served (issue 16 measured ~70 KB) —
gigabytes at fleet scale. So after each batch the consumer counts the distinct schemas its
current connection has touched, and closes the connection once that passes
``KODY_ACTOR_RECYCLE_SCHEMAS`` or, checked every ``CHECK_EVERY`` new schemas, once the
backend's memory (``pg_backend_memory_contexts``) passes ``KODY_ACTOR_RECYCLE_MEMORY_MB``.
The next batch opens a fresh one (and the consumer names the new session in the shard's
epoch row, ``ShardConsumer._track_session``). Recycling happens only between batches, never
inside a transaction. Either setting at 0 switches that trigger off.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

log = logging.getLogger("kody.actors.worker")

# New schemas between two looks at the backend's memory: one cheap query per this many.
CHECK_EVERY = 64


def backend_memory_bytes(using: str = DEFAULT_DB_ALIAS) -> int:
    """Bytes held by this connection's backend, every memory context summed."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(total_bytes), 0)::bigint FROM pg_backend_memory_contexts"
        )
        return int(cursor.fetchone()[0])


class Recycler:
    """One per consumer thread (connections are per thread)."""

    total = 0  # connections recycled by every consumer of this process (tests, logs)

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using
        self.recycled = 0  # connections closed so far, for tests and logs
        self._raw: Any = None
        self._seen: set[str] = set()
        self._unchecked = 0

    def after_batch(self, user_ids: Iterable[str]) -> str | None:
        """Count the batch's users against the current connection; close it if it is due.
        Returns why it was recycled (``schemas`` / ``memory``), or None."""
        connection = connections[self.using]
        raw = connection.connection
        if raw is None or connection.in_atomic_block:
            return None
        if raw is not self._raw:  # a new connection (reconnected after an error, or recycled)
            self._raw, self._seen, self._unchecked = raw, set(), 0
        before = len(self._seen)
        self._seen.update(user_ids)
        self._unchecked += len(self._seen) - before
        why = self._due()
        if why is not None:
            log.info(
                "recycling the database connection after %d schemas (%s)", len(self._seen), why
            )
            connection.close()
            self._raw, self._seen, self._unchecked = None, set(), 0
            self.recycled += 1
            Recycler.total += 1
        return why

    def _due(self) -> str | None:
        most = settings.KODY_ACTOR_RECYCLE_SCHEMAS
        if most and len(self._seen) >= most:
            return "schemas"
        limit_mb = settings.KODY_ACTOR_RECYCLE_MEMORY_MB
        if not limit_mb or self._unchecked < CHECK_EVERY:
            return None
        self._unchecked = 0
        try:
            held = backend_memory_bytes(self.using)
        except DatabaseError:
            return None  # the next batch finds out what is wrong with the connection
        return "memory" if held > limit_mb * 1024 * 1024 else None
