"""The only place that changes ``search_path``.

``search_path`` is set with ``SET LOCAL``, so it ends with the transaction whatever happens.
When the scope runs inside a caller's transaction (an inline actor call from code that is
already in ``atomic()``), a released savepoint would let it leak into the rest of the caller's
transaction; the scope then puts the previous value back itself. On an error the enclosing
savepoint's rollback undoes the ``SET LOCAL``.

``timeouts`` (milliseconds: lock wait, statement) set ``lock_timeout`` and
``statement_timeout`` the same way, before any ``then`` statement, and a nested scope puts
the caller's values back too.

``then`` statements go out in the same round trip as the ``SET LOCAL`` (psycopg pipeline
mode) and their rows are yielded. The actor runtime sends its owner-row lock and call-record
lookup this way: four round trips (BEGIN, SET, lock, lookup) become one. ``search_path`` and
the timeouts are one statement (``set_config(..., true)``, which is ``SET LOCAL``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError

from kody.userschema.naming import checked

Statement = tuple[str, Sequence[Any]]


def pipelined(
    connection: BaseDatabaseWrapper, statements: Sequence[Statement]
) -> list[list[tuple]]:
    """Run ``statements`` in one round trip (psycopg pipeline mode); each one's rows."""
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
    schema: str,
    using: str = DEFAULT_DB_ALIAS,
    *,
    then: Sequence[Statement] = (),
    timeouts: tuple[int, int] | None = None,
) -> Iterator[list[list[tuple]]]:
    connection = connections[using]
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    nested = len(connection.atomic_blocks) > 1
    statements: list[Statement] = []
    if nested:
        statements.append((f"SELECT {', '.join(map(_current, _SETTINGS))}", ()))
    # set_config(..., true) is SET LOCAL; one statement sets the path and the timeouts.
    configs = ["set_config('search_path', %s, true)"]
    params = [f"{checked(schema)}, public"]  # u_ + hex: needs no quotes
    if timeouts is not None:
        configs += [
            "set_config('lock_timeout', %s, true)",
            "set_config('statement_timeout', %s, true)",
        ]
        params += [f"{int(timeouts[0])}ms", f"{int(timeouts[1])}ms"]
    statements.append((f"SELECT {', '.join(configs)}", params))
    results = pipelined(connection, [*statements, *then])
    yield results[len(statements) :]
    if nested and not connection.needs_rollback:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(map(_restore, _SETTINGS))}", list(results[0][0]))


# What a scope changes, so a nested one can put the caller's values back.
_SETTINGS = ("search_path", "lock_timeout", "statement_timeout")


def _current(name: str) -> str:
    return f"current_setting('{name}')"


def _restore(name: str) -> str:
    return f"set_config('{name}', %s, true)"
