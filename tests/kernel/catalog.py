"""What a schema holds, read from the catalog (for tests about upgrades and restores)."""

from __future__ import annotations

from django.db import connection


def relation_names(schema: str, kind: str) -> set[str]:
    """Names of the relations of ``kind`` (``pg_class.relkind``: ``r`` tables, ``i`` indexes)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT relname FROM pg_class WHERE relkind = %s AND relnamespace = %s::regnamespace",
            [kind, schema],
        )
        return {row[0] for row in cursor.fetchall()}
