"""Bounded backend memory: a shard consumer's database connection is recycled when its
backend holds too much, measured — not after a count of schemas.

Design note. A Postgres backend caches the catalog entries (relcache, catcache) of every
relation it has touched and never gives them back. A shard consumer serves thousands of
users through one long-lived connection, each with its own schema of ~15-40 relations, so its
backend grows by tens of kilobytes per user it has ever served — gigabytes at fleet scale.
Closing the connection frees that, but the next connection starts with a cold cache: every
schema it serves loads its relations again, which made warm calls 1.5x slower on a fleet
whose active users outnumbered a fixed recycle count. So the consumer measures instead:
after each batch that brought ``CHECK_EVERY`` schemas new to its connection, it reads the
backend's own memory (``pg_backend_memory_contexts``, every context summed) and closes the
connection once that passes ``KODY_ACTOR_RECYCLE_MEMORY_MB``. A fleet whose working set fits
keeps its warm cache for ever; one that does not is cut before the limit.

The view is per backend and answers over any connection, so this works on a remote server
as on the embedded one (``/proc/<pid>/status`` would not). It is readable by superusers and
by roles granted ``pg_read_all_stats``; a role without either (or a server before Postgres
14) cannot measure, and then the consumer falls back to a budget of schemas:
``KODY_ACTOR_RECYCLE_MEMORY_MB`` over ``FALLBACK_KB_PER_SCHEMA`` (about twice what one user's
schema was measured to cost), logged once per process. Recycling happens only between
batches, never inside a transaction; the next batch opens a fresh connection (and the
consumer names the new session in the shard's epoch row, ``ShardConsumer._track_session``).
``KODY_ACTOR_RECYCLE_MEMORY_MB = 0`` switches it off.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, ProgrammingError, connections

log = logging.getLogger("kody.actors.worker")

# New schemas between two looks at the backend's memory: one cheap query per this many
# (64 schemas add a few megabytes at most, well inside the limit's headroom).
CHECK_EVERY = 64
# When the memory cannot be read: what one schema is assumed to cost the backend.
FALLBACK_KB_PER_SCHEMA = 128


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
    # Set once the server refused to show a backend's memory: the schema budget applies.
    unmeasurable = False

    def __init__(self, using: str = DEFAULT_DB_ALIAS) -> None:
        self.using = using
        self.recycled = 0  # connections closed so far, for tests and logs
        self._raw: Any = None
        self._seen: set[str] = set()
        self._unchecked = 0

    def after_batch(self, user_ids: Iterable[str]) -> str | None:
        """Count the batch's users against the current connection; close it if it is due.
        Returns why it was recycled (``memory``, or ``schemas`` on the fallback), or None."""
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
        limit_mb = settings.KODY_ACTOR_RECYCLE_MEMORY_MB
        if not limit_mb:
            return None
        if Recycler.unmeasurable:
            budget = max(1, limit_mb * 1024 // FALLBACK_KB_PER_SCHEMA)
            return "schemas" if len(self._seen) >= budget else None
        if self._unchecked < CHECK_EVERY:
            return None
        self._unchecked = 0
        try:
            held = backend_memory_bytes(self.using)
        except ProgrammingError:  # no privilege to read the view, or no such view
            log.warning(
                "cannot read pg_backend_memory_contexts (grant pg_read_all_stats to measure):"
                " recycling after %d schemas instead",
                max(1, limit_mb * 1024 // FALLBACK_KB_PER_SCHEMA),
                exc_info=True,
            )
            Recycler.unmeasurable = True
            return self._due()
        except DatabaseError:
            return None  # the next batch finds out what is wrong with the connection
        return "memory" if held > limit_mb * 1024 * 1024 else None
