"""The only place that changes ``search_path``.

``search_path`` is set with ``SET LOCAL``, so it ends with the transaction whatever happens.
When the scope runs inside a caller's transaction (an inline actor call from code that is
already in ``atomic()``), a released savepoint would let it leak into the rest of the caller's
transaction; the scope then puts the previous value back itself. On an error the enclosing
savepoint's rollback undoes the ``SET LOCAL``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.transaction import TransactionManagementError

from kody.userschema.naming import quoted


@contextmanager
def user_schema_scope(schema: str, using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    connection = connections[using]
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    nested = len(connection.atomic_blocks) > 1
    previous = ""
    with connection.cursor() as cursor:
        if nested:
            cursor.execute("SELECT current_setting('search_path')")
            previous = cursor.fetchone()[0]
        cursor.execute(f"SET LOCAL search_path TO {quoted(schema)}, public")
    yield
    if nested and not connection.needs_rollback:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('search_path', %s, true)", [previous])
