"""The only place that changes ``search_path``.

``search_path`` is set with ``SET LOCAL``, so it ends with the transaction whatever happens.
When the scope runs inside a caller's transaction (an inline actor call from code that is
already in ``atomic()``), a released savepoint would let it leak into the rest of the caller's
transaction; the scope then puts the previous value back itself. On an error the enclosing
savepoint's rollback undoes the ``SET LOCAL``.

``then`` statements go out in the same round trip as the ``SET LOCAL`` (psycopg pipeline
mode) and their rows are yielded. The actor runtime sends its owner-row lock and call-record
lookup this way: four round trips (BEGIN, SET, lock, lookup) become one.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError

from kody.userschema.naming import quoted

Statement = tuple[str, Sequence[Any]]


def _pipelined(
    connection: BaseDatabaseWrapper, statements: Sequence[Statement]
) -> list[list[tuple]]:
    connection.ensure_connection()
    raw = connection.connection
    with connection.wrap_database_errors:
        with raw.pipeline():
            cursors = [raw.cursor() for _ in statements]
            for cursor, (sql, params) in zip(cursors, statements, strict=True):
                cursor.execute(sql, params or None)
        return [cursor.fetchall() if cursor.description else [] for cursor in cursors]


@contextmanager
def user_schema_scope(
    schema: str, using: str = DEFAULT_DB_ALIAS, *, then: Sequence[Statement] = ()
) -> Iterator[list[list[tuple]]]:
    connection = connections[using]
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    nested = len(connection.atomic_blocks) > 1
    statements: list[Statement] = [("SELECT current_setting('search_path')", ())] if nested else []
    statements.append((f"SET LOCAL search_path TO {quoted(schema)}, public", ()))
    results = _pipelined(connection, [*statements, *then])
    yield results[len(statements) :]
    if nested and not connection.needs_rollback:
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('search_path', %s, true)", [results[0][0][0]])
