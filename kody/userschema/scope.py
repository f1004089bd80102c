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

``deferred_search_path`` is the batch form (ADR 0022): inside one open transaction that
runs several users one after another, ``switch(schema)`` costs no round trip of its own; the
``set_config`` goes out in front of the next statement the connection sends (a
multi-statement query on Django's client-side binding cursor, whose second result the cursor
is then moved to), or first in the next ``pipelined`` round trip. ``deferred_prelude`` is the
optimistic form (ADR 0027, 0033): a transaction's ``BEGIN``, search path, timeouts and checks
go out in front of its first statement, and ``switch`` moves on to the next user's schema.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.transaction import TransactionManagementError
from psycopg import ClientCursor, ServerCursor
from psycopg.pq import TransactionStatus

from kody.userschema.naming import checked

Statement = tuple[str, Sequence[Any]]


def pipelined(
    connection: BaseDatabaseWrapper, statements: Sequence[Statement]
) -> list[list[tuple]]:
    """Run ``statements`` in one round trip (psycopg pipeline mode); each one's rows."""
    connection.ensure_connection()
    raw = connection.connection
    deferred: DeferredSearchPath | None = getattr(connection, "kody_deferred_path", None)
    first = deferred.take() if deferred is not None else []
    statements = [*((text, ()) for text in first), *statements]
    with connection.wrap_database_errors:
        with raw.pipeline():
            cursors = [raw.cursor() for _ in statements]
            for cursor, (sql, params) in zip(cursors, statements, strict=True):
                cursor.execute(sql, params or None)
        results = [cursor.fetchall() if cursor.description else [] for cursor in cursors]
    return results[len(first) :]


def in_one_query(
    connection: BaseDatabaseWrapper,
    statements: Sequence[Statement],
    *,
    rows: bool | Collection[int] = True,
) -> list[list[tuple]]:
    """Run ``statements`` as ONE multi-statement query (simple protocol, parameters bound
    client-side); each one's rows. One send and one wait, where pipeline mode sends and
    polls per statement; and when the transaction has not begun yet its ``BEGIN`` goes out
    in the same query instead of psycopg's own round trip before it.

    Each statement still takes its own snapshot (READ COMMITTED), so a read placed after a
    lock sees what committed before the lock was granted. Statements without parameters are
    sent as written; those with parameters are bound first (``mogrify``).

    Under a :class:`DeferredSearchPath` its pending statements go first, and a transaction's
    prelude fails with the query (``failed``) as it does on a Django cursor's statement. The
    query goes out on the psycopg connection's own cursor: Django's execute wrappers and its
    ``DEBUG`` query log do not see it. ``rows=False``: nothing is read back (an empty list),
    for statements whose only answer is success or an error (the runtime's records, fence
    guard and ``COMMIT``); walking each statement's result costs more than their text.
    ``rows`` as the indexes of the statements whose rows are wanted: only theirs are read,
    every other statement's result is an empty list (a planned batch reads its charges'
    rows, not its locks' or search paths'). A statement that returns no columns gives an
    empty list either way; a result is tested by its field count, without building
    psycopg's column descriptions."""
    connection.ensure_connection()
    raw = connection.connection
    deferred: DeferredSearchPath | None = getattr(connection, "kody_deferred_path", None)
    carries = deferred is not None and deferred.prelude_pending
    texts = deferred.take() if deferred is not None else []
    try:
        with connection.wrap_database_errors, raw.cursor() as cursor:
            for sql, params in statements:
                texts.append(cursor.mogrify(sql, params) if params else sql)
            ahead = len(texts) - len(statements) + _execute_begun(raw, cursor, texts)
            results: list[list[tuple]] = []
            if rows is not False:
                wanted = None if rows is True else rows
                for _ in range(ahead):
                    cursor.nextset()  # BEGIN's and the deferred statements' results
                for index in range(len(statements)):
                    read = wanted is None or index in wanted
                    result = cursor.pgresult
                    results.append(cursor.fetchall() if read and result and result.nfields else [])
                    cursor.nextset()
    except BaseException as exc:
        if carries:
            deferred.failed = exc  # type: ignore[union-attr]
        raise
    return results


def _begins(raw: Any) -> bool:
    """Whether the next statement opens the transaction: psycopg would send ``BEGIN`` in a
    round trip of its own first."""
    return not raw.autocommit and raw.info.transaction_status == TransactionStatus.IDLE


@contextmanager
def _begun(raw: Any, texts: list[str]) -> Iterator[list[str]]:
    """``texts`` with the transaction's ``BEGIN`` in front when it has not begun yet: it is
    the query's first statement instead of a round trip of its own (the flag is psycopg's
    alone, nothing changes on the server)."""
    if not _begins(raw):
        yield texts
        return
    raw._autocommit = True
    try:
        yield [raw._get_tx_start_command().decode(), *texts]
    finally:
        raw._autocommit = False


def _execute_begun(raw: Any, cursor: Any, texts: list[str]) -> int:
    """``texts`` as one query on ``cursor`` as :func:`_begun` sends them (without its
    context manager, on the runtime's every call); how many statements went in front."""
    if not _begins(raw):
        cursor.execute(";\n".join(texts))
        return 0
    raw._autocommit = True
    try:
        cursor.execute(";\n".join([raw._get_tx_start_command().decode(), *texts]))
    finally:
        raw._autocommit = False
    return 1


def _path_config(schema: str) -> str:
    # u_ + hex (checked): a literal needs no quoting and holds no % for client-side binding.
    return f"set_config('search_path', '{checked(schema)}, public', true)"


def _path_sql(schema: str) -> str:
    return f"SELECT {_path_config(schema)}"


def path_statement(schema: str) -> Statement:
    """``SET LOCAL search_path`` to a user schema as a statement of an ``in_one_query``."""
    return _path_sql(schema), ()


class PreludeBypassed(Exception):
    """A statement reached the database around Django's execute wrappers (a raw psycopg
    cursor, ``cursor.copy``) before a transaction's deferred prelude: the prelude would not
    have been its first statements. The transaction must be rolled back and run the plain
    way (``kody.actors.runtime``)."""


class DeferredSearchPath:
    """An execute wrapper that sends pending statements (a ``SET LOCAL search_path``, or a
    transaction's whole prelude) in front of the connection's next statement instead of in a
    round trip of their own.

    Installed by :func:`deferred_search_path` (or :func:`deferred_prelude`) for the span of
    one transaction. Every statement Django's cursors send passes through it; the first one
    after ``switch`` goes out as ``SELECT set_config(...); <statement>`` (with the
    transaction's ``BEGIN`` in front when it has not begun) and the cursor is moved to the
    statement's own result, so ``fetch*``, ``rowcount`` and ``description`` are the
    statement's. A statement that cannot carry them (``executemany``, a server-side or
    server-binding cursor, composed SQL) gets them sent just before, as a query of its own.
    ``cursor.copy`` bypasses Django's execute wrappers: a method that starts with a COPY must
    name its schema (as hibernation does); under a prelude that must come first, it is
    caught (``PreludeBypassed``) when the next statement finds the transaction already open.

    A transaction's prelude (``deferred_prelude``) stays pending until a statement carries
    it: ``switch`` replaces only the search path a previous ``switch`` left pending, so a
    batch's users whose methods send nothing pass the prelude on to the next user's first
    statement (ADR 0033, amendment).

    ``failed`` keeps the error of the query that carried the prelude — a Django cursor's
    statement or an :func:`in_one_query` (the runtime's records, fence guard and ``COMMIT``
    when the methods sent nothing) — so a caller can tell that its checks failed even if the
    code that ran it swallowed the exception."""

    def __init__(self, connection: BaseDatabaseWrapper, prelude: Sequence[str] = ()) -> None:
        self.connection = connection
        self._prelude = list(prelude)  # the transaction's first statements, until sent
        self._path: list[str] = []
        self.failed: BaseException | None = None

    def switch(self, schema: str) -> None:
        self._path = [_path_sql(schema)]

    @property
    def prelude_pending(self) -> bool:
        """Whether the transaction's prelude still waits for a statement to carry it."""
        return bool(self._prelude)

    def take(self) -> list[str]:
        prelude, path = self._prelude, self._path
        self._prelude, self._path = [], []
        if prelude:
            status = self.connection.connection.info.transaction_status
            if status != TransactionStatus.IDLE:
                self.failed = PreludeBypassed("a statement ran before the transaction's prelude")
                raise self.failed
        return [*prelude, *path]

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        prelude = bool(self._prelude)
        pending = self.take()
        if not pending:
            return execute(sql, params, many, context)
        raw = self.connection.connection
        cursor = getattr(context.get("cursor"), "cursor", None)
        plain = isinstance(cursor, ClientCursor) and not isinstance(cursor, ServerCursor)
        try:
            if many or not plain or not isinstance(sql, str):
                with self.connection.wrap_database_errors, raw.cursor() as own:
                    own.execute(";\n".join(pending))
                return execute(sql, params, many, context)
            if params is not None:
                # Bound on its own, so psycopg parses (and caches) the statement's text alone,
                # not a new prelude-and-statement text per call; the query goes out bound.
                with self.connection.wrap_database_errors:
                    sql, params = cursor.mogrify(sql, params), None
            with _begun(raw, pending) as texts:
                result = execute(";\n".join([*texts, sql]), params, many, context)
        except BaseException as exc:
            if prelude:
                self.failed = exc
            raise
        for _ in texts:
            cursor.nextset()  # to the statement's own result, past BEGIN's and the prelude's
        return result


def _wrapper(using: str | BaseDatabaseWrapper) -> BaseDatabaseWrapper:
    """The connection for ``using``: an alias, or the wrapper a caller already resolved (the
    actor runtime looks it up once per ``execute``; ``connections[alias]`` is a thread-local
    lookup each time)."""
    return connections[using] if isinstance(using, str) else using


@contextmanager
def _installed(deferred: DeferredSearchPath) -> Iterator[DeferredSearchPath]:
    connection = deferred.connection
    if not connection.in_atomic_block:
        raise TransactionManagementError("a user schema is only reachable inside atomic()")
    connection.kody_deferred_path = deferred  # type: ignore[attr-defined]
    try:
        with connection.execute_wrapper(deferred):
            yield deferred
    finally:
        connection.kody_deferred_path = None  # type: ignore[attr-defined]


@contextmanager
def deferred_search_path(
    using: str | BaseDatabaseWrapper = DEFAULT_DB_ALIAS,
) -> Iterator[DeferredSearchPath]:
    """Inside an open transaction: a :class:`DeferredSearchPath` whose ``switch(schema)``
    points ``search_path`` at a user schema (``SET LOCAL``) with the next statement sent."""
    with _installed(DeferredSearchPath(_wrapper(using))) as deferred:
        yield deferred


@contextmanager
def deferred_prelude(
    schema: str,
    then: Sequence[str],
    using: str | BaseDatabaseWrapper = DEFAULT_DB_ALIAS,
    *,
    timeouts: tuple[int, int],
) -> Iterator[DeferredSearchPath]:
    """Inside an outermost ``atomic()`` that has sent nothing yet: the transaction's first
    statements — ``BEGIN``, ``search_path`` and the timeouts (``SET LOCAL``), then ``then``
    (literal SQL, no parameters, no ``%``) — go out in front of the first statement the
    connection sends (the actor runtime's optimistic prelude, ADR 0027). If any statement
    reaches the server before them, the next one raises :class:`PreludeBypassed`. Its
    ``switch(schema)`` then points ``search_path`` at another schema with the next statement
    (a batch of several users, ADR 0033), keeping the prelude in front if nothing carried it
    yet."""
    connection = _wrapper(using)
    if len(connection.atomic_blocks) != 1:
        raise TransactionManagementError("a deferred prelude opens the outermost transaction")
    # Literals: u_ + hex, and two integers (no quoting, no % for client-side binding).
    lock, statement = (int(each) for each in timeouts)
    configs = [
        _path_config(schema),
        f"set_config('lock_timeout', '{lock}ms', true)",
        f"set_config('statement_timeout', '{statement}ms', true)",
    ]
    deferred = DeferredSearchPath(connection, [f"SELECT {', '.join(configs)}", *then])
    with _installed(deferred):
        yield deferred


@contextmanager
def user_schema_scope(
    schema: str,
    using: str | BaseDatabaseWrapper = DEFAULT_DB_ALIAS,
    *,
    then: Sequence[Statement] = (),
    timeouts: tuple[int, int] | None = None,
) -> Iterator[list[list[tuple]]]:
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


def set_timeouts(timeouts: tuple[int, int]) -> Statement:
    """``SET LOCAL`` of ``lock_timeout`` and ``statement_timeout`` (milliseconds), one
    statement: what ``user_schema_scope(timeouts=...)`` sets, for a transaction that runs
    several users' schemas (the actor runtime's batch prelude)."""
    configs, params = _timeout_configs(timeouts)
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
