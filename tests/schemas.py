"""Per-user schemas outlive a transactional test (they are committed, and the cast's stable ids
repeat from test to test): the one way tests drop them."""

from __future__ import annotations


def drop_user_schemas() -> None:
    """Drop every user schema and forget this process's cache of them."""
    from django.db import connection

    from kody.userschema.naming import like_pattern
    from kody.userschema.schemas import known

    with connection.cursor() as cursor:
        cursor.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", [like_pattern()])
        for (name,) in cursor.fetchall():
            cursor.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')
    known.clear()
