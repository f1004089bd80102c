"""Per-user schemas outlive a transactional test (they are committed, and the cast's stable ids
repeat from test to test): the one way tests drop them."""

from __future__ import annotations

import time

# deadlock_detected: a DROP that met a shard worker still finishing a call (a redelivery after
# a takeover, say) holding one of the schema's tables while asking for another.
_DEADLOCK = "40P01"


def drop_user_schemas() -> None:
    """Drop every user schema and forget this process's cache of them. A DROP Postgres chose
    as a deadlock's victim is tried again once the other transaction is through."""
    from django.db import OperationalError, connection

    from kody.userschema.naming import like_pattern
    from kody.userschema.schemas import known

    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [like_pattern()])
        for (name,) in cursor.fetchall():
            for attempt in range(5):
                try:
                    cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
                    break
                except OperationalError as exc:
                    if getattr(exc.__cause__, "sqlstate", None) != _DEADLOCK or attempt == 4:
                        raise
                    time.sleep(0.2)
    known.clear()
