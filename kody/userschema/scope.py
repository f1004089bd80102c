"""The only place that changes ``search_path``, and the one way the kernel sends SQL text.

``search_path`` is set with ``SET LOCAL``, so it ends with the transaction whatever happens.
Inside a caller's transaction (an inline actor call made from code already in ``atomic()``)
a released savepoint would let it leak into the rest of that transaction, so a nested scope
puts the caller's values back itself; on an error the savepoint's rollback undoes them.
``timeouts`` (milliseconds: lock wait, statement) set ``lock_timeout`` and
``statement_timeout`` the same way.

Round trips are what an actor call costs, so the kernel sends its own statements as one
multi-statement query (``in_one_query``): one send, one wait, the transaction's ``BEGIN``
in front instead of in a round trip of its own. That is the only place the kernel talks to
psycopg directly; everything a method sends goes through Django's cursor. A batch that runs
several users in one transaction points ``search_path`` at the next user with that user's
first statement (``deferred_search_path``), not with a round trip of its own.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError
from psycopg import ClientCursor, ServerCursor
from psycopg.pq import TransactionStatus

from kody.userschema.naming import checked

# Parameters are positional (``%s``) or named (``%(name)s``), as a cursor takes them.
Statement = tuple[str, Sequence[Any] | Mapping[str, Any]]


def in_one_query(
    connection: BaseDatabaseWrapper,
    statements: Sequence[Statement],
    *,
    rows: bool | Collection[int] = True,
) -> list[list[tuple]]:
    """Run ``statements`` as ONE multi-statement query (simple protocol, parameters bound
    client-side) and return each one's rows.

    Each statement still takes its own snapshot (READ COMMITTED), so a read placed after a
    lock sees what committed before the lock was granted; an error stops the statements
    after it. A search path a batch switched to and no statement carried yet goes first.

    It does for the query what Django's cursor does for a statement: refuses a transaction
    an inner ``atomic()`` marked for rollback, raises Django's errors, and logs the query
    when Django logs queries (``DEBUG``, ``CaptureQueriesContext``) — one entry per round
    trip. ``rows`` as indexes: only those statements' rows are read (``False``: none, for
    statements whose only answer is success or an error); walking every result costs more
    than the text of the statements that need none."""
    connection.ensure_connection()
    connection.validate_no_broken_transaction()
    raw = connection.connection
    deferred: DeferredSearchPath | None = getattr(connection, "kody_deferred_path", None)
    texts = deferred.take() if deferred is not None else []
    started = time.monotonic() if connection.queries_logged else None
    try:
        with connection.wrap_database_errors, raw.cursor() as cursor:
            for sql, params in statements:
                texts.append(cursor.mogrify(sql, params) if params else sql)
            ahead = len(texts) - len(statements) + _execute_begun(raw, cursor, texts)
            results: list[list[tuple]] = []
            if rows is not False:
                wanted = None if rows is True else rows
                for _ in range(ahead):
                    cursor.nextset()  # BEGIN's and the pending search path's results
                for index in range(len(statements)):
                    read = wanted is None or index in wanted
                    result = cursor.pgresult
                    results.append(cursor.fetchall() if read and result and result.nfields else [])
                    cursor.nextset()
    finally:
        if started is not None:
            connection.queries_log.append(
                {"sql": ";\n".join(texts), "time": f"{time.monotonic() - started:.3f}"}
            )
    return results


def _execute_begun(raw: Any, cursor: Any, texts: list[str]) -> int:
    """Send ``texts`` as one query on ``cursor``; when the transaction has not begun, with
    its ``BEGIN`` in front (psycopg would send that in a round trip of its own first; the
    flag is psycopg's alone, nothing changes on the server). How many went in front."""
    if raw.autocommit or raw.info.transaction_status != TransactionStatus.IDLE:
        cursor.execute(";\n".join(texts))
        return 0
    raw._autocommit = True
    try:
        cursor.execute(";\n".join([raw._get_tx_start_command().decode(), *texts]))
    finally:
        raw._autocommit = False
    return 1


def _path_sql(schema: str) -> str:
    # u_ + hex (checked): a literal needs no quoting and holds no % for client-side binding.
    return f"SELECT set_config('search_path', '{checked(schema)}, public', true)"


def path_statement(schema: str) -> Statement:
    """``SET LOCAL search_path`` to a user schema as a statement of an ``in_one_query``."""
    return _path_sql(schema), ()


class DeferredSearchPath:
    """An execute wrapper that sends a pending ``SET LOCAL search_path`` in front of the
    connection's next statement instead of in a round trip of its own.

    The first statement after ``switch`` goes out as ``SELECT set_config(...); <statement>``
    and the cursor is moved to the statement's own result, so ``fetch*``, ``rowcount`` and
    ``description`` are the statement's. A statement that cannot carry it (``executemany``,
    a server-side or server-binding cursor, composed SQL) gets it sent just before, as a
    query of its own. ``cursor.copy`` passes no execute wrapper: a method that starts with a
    COPY must name its schema (as hibernation does)."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.connection = connection
        self._path: list[str] = []

    def switch(self, schema: str) -> None:
        self._path = [_path_sql(schema)]

    def take(self) -> list[str]:
        path, self._path = self._path, []
        return path

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        pending = self.take()
        if not pending:
            return execute(sql, params, many, context)
        cursor = getattr(context.get("cursor"), "cursor", None)
        plain = isinstance(cursor, ClientCursor) and not isinstance(cursor, ServerCursor)
        if many or not plain or not isinstance(sql, str) or cursor is None:
            in_one_query(self.connection, [(text, ()) for text in pending], rows=False)
            return execute(sql, params, many, context)
        if params is not None:
            # Bound on its own, so psycopg parses (and caches) the statement's text alone,
            # not a new path-and-statement text per call; the query goes out bound.
            with self.connection.wrap_database_errors:
                sql, params = cursor.mogrify(sql, params), None
        result = execute(";\n".join([*pending, sql]), params, many, context)
        for _ in pending:
            cursor.nextset()  # to the statement's own result
        return result


def _wrapper(using: str | BaseDatabaseWrapper) -> BaseDatabaseWrapper:
    """The connection for ``using``: an alias, or the wrapper a caller already resolved (the
    actor runtime looks it up once per ``execute``; ``connections[alias]`` is a thread-local
    lookup each time)."""
    return connections[using] if isinstance(using, str) else using


@contextmanager
def deferred_search_path(
    using: str | BaseDatabaseWrapper = DEFAULT_DB_ALIAS,
) -> Iterator[DeferredSearchPath]:
    """Inside an open transaction: a :class:`DeferredSearchPath` whose ``switch(schema)``
    points ``search_path`` at a user schema (``SET LOCAL``) with the next statement sent."""
    connection = _wrapper(using)
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    deferred = DeferredSearchPath(connection)
    outer = getattr(connection, "kody_deferred_path", None)  # a batch around an inline call
    connection.kody_deferred_path = deferred  # type: ignore[attr-defined]
    try:
        with connection.execute_wrapper(deferred):
            yield deferred
    finally:
        connection.kody_deferred_path = outer  # type: ignore[attr-defined]


@contextmanager
def user_schema_scope(
    schema: str,
    using: str | BaseDatabaseWrapper = DEFAULT_DB_ALIAS,
    *,
    then: Sequence[Statement] = (),
    timeouts: tuple[int, int] | None = None,
) -> Iterator[list[list[tuple]]]:
    """Inside ``atomic()``: ``search_path`` on ``schema`` (and the timeouts), then ``then``,
    in one round trip; yields ``then``'s rows. Nested in a caller's transaction, the caller's
    values are read in the same round trip and put back at the end."""
    connection = _wrapper(using)
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    nested = len(connection.atomic_blocks) > 1
    statements: list[Statement] = []
    if nested:
        statements.append((f"SELECT {', '.join(map(_current, _SETTINGS))}", ()))
    statements.append(schema_settings(schema, timeouts))
    results = in_one_query(connection, [*statements, *then])
    yield results[len(statements) :]
    if nested and not connection.needs_rollback:
        with connection.cursor() as cursor:
            cursor.execute(f"SELECT {', '.join(map(_restore, _SETTINGS))}", list(results[0][0]))


def schema_settings(schema: str, timeouts: tuple[int, int] | None = None) -> Statement:
    """ONE statement setting ``search_path`` to the user's schema and, with ``timeouts``
    (milliseconds: lock wait, statement), both timeouts; ``set_config(..., true)`` is
    ``SET LOCAL``. What ``user_schema_scope`` sends first, and a read's prelude too."""
    configs = ["set_config('search_path', %s, true)"]
    params = [f"{checked(schema)}, public"]  # u_ + hex: needs no quotes
    if timeouts is not None:
        more, values = _timeout_configs(timeouts)
        configs += more
        params += values
    return f"SELECT {', '.join(configs)}", params


def _timeout_configs(timeouts: tuple[int, int]) -> tuple[list[str], list[str]]:
    configs = ["set_config('lock_timeout', %s, true)", "set_config('statement_timeout', %s, true)"]
    return configs, [f"{int(timeouts[0])}ms", f"{int(timeouts[1])}ms"]


# What a scope changes, so a nested one can put the caller's values back.
_SETTINGS = ("search_path", "lock_timeout", "statement_timeout")


def _current(name: str) -> str:
    return f"current_setting('{name}')"


def _restore(name: str) -> str:
    return f"set_config('{name}', %s, true)"
