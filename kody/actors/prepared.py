"""The one-statement path's statements as per-schema prepared statements.

Why. A one-statement call is the same few texts on every call for a user: the owner-lock
check, the tombstone check, and the method's statement with its record. Postgres parses
and plans each of them on every call, and for the meter's charge that is more backend CPU
than running them (about 0.27 ms of planning against 0.13 ms of execution, measured with
``EXPLAIN ANALYZE``). A session-level ``PREPARE`` cannot be shared across users: Postgres
re-plans a prepared statement whenever ``search_path`` differs from its last run, so each
(schema, text) pair gets a name of its own (``kp_`` and a digest), prepared the second time
the session sees the pair (a user seen once costs nothing extra) and run as
``EXECUTE kp_…(values)``: still one statement of the batch's one query.

Which names a session holds is tracked per raw psycopg connection (weakly: a reconnect
starts afresh), at most ``KODY_ACTOR_PREPARED_MAX``; the least recently used one is
``DEALLOCATE``d in the query that prepares one more. 0 turns it off (a transaction-mode
pooler hands a session's statements to other backends). ``PREPARE`` and ``DEALLOCATE`` do
not roll back with the transaction, so when a query holding one fails, which of them ran is
unknown: the session is marked unsure and, before its next one-statement batch, what it
really holds is read from ``pg_prepared_statements`` (one round trip, after such a failure
only). A statement dropped under us (``DISCARD ALL``) fails its ``EXECUTE``; the batch takes
the plain path as on any failure, and the session is read again.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.userschema.scope import Statement

PREFIX = "kp_"
# invalid_sql_statement_name: an EXECUTE of a name the session does not hold.
_NOT_PREPARED = "26000"
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")


class _Session:
    """One database session's prepared names (least recently used first), and the pairs
    seen once."""

    def __init__(self) -> None:
        self.names: OrderedDict[str, None] = OrderedDict()
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.unsure = False


_SESSIONS: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()


@functools.lru_cache(maxsize=4096)
def _name(schema: str, sql: str) -> str:
    digest = hashlib.blake2b(f"{schema}\x00{sql}".encode(), digest_size=12).hexdigest()
    return PREFIX + digest


@functools.lru_cache(maxsize=256)
def _numbered(sql: str, named: bool) -> tuple[str, tuple[str, ...], int]:
    """``sql`` with psycopg's placeholders as ``$n``; the names in ``$n`` order (a name used
    twice is one parameter) and how many there are. Once per text: the forms are few."""
    keys: list[str] = []
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        key = match.group(1)
        if match.group(0) == "%%":
            return "%"
        if (key is not None) != named:
            raise ValueError("named and positional placeholders cannot be mixed")
        if key is None:
            count += 1
            return f"${count}"
        if key not in keys:
            keys.append(key)
        return f"${keys.index(key) + 1}"

    return _PLACEHOLDER.sub(number, sql), tuple(keys), len(keys) if named else count


class Batch:
    """One one-statement query's prepared statements: ``wrap`` each statement; ``failed``
    when the query raised."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.maximum = max(0, int(getattr(settings, "KODY_ACTOR_PREPARED_MAX", 0)))
        self.session: _Session | None = None
        self.touched = False  # a PREPARE or DEALLOCATE is in the query
        if self.maximum:
            connection.ensure_connection()
            raw = connection.connection
            session = _SESSIONS.get(raw)
            if session is None:
                session = _SESSIONS[raw] = _Session()
            if session.unsure:
                _reread(raw, session)
            self.session = session

    def wrap(self, schema: str, statement: Statement) -> list[Statement]:
        """The statements that run ``statement`` on ``schema``'s search path: itself until
        the session has seen it twice, then (a ``DEALLOCATE`` of the oldest name and the
        ``PREPARE`` ahead, once) its ``EXECUTE``. The last one answers its rows."""
        session = self.session
        if session is None:
            return [statement]
        sql, params = statement
        name = _name(schema, sql)
        ahead: list[Statement] = []
        if name in session.names:
            session.names.move_to_end(name)
        elif name not in session.seen:
            session.seen[name] = None
            while len(session.seen) > 4 * self.maximum:
                session.seen.popitem(last=False)
            return [statement]
        else:
            while len(session.names) >= self.maximum:
                oldest, _ = session.names.popitem(last=False)
                ahead.append((f"DEALLOCATE {oldest}", ()))
            body, _, _ = _numbered(sql, isinstance(params, Mapping))
            ahead.append((f"PREPARE {name} AS {body}", ()))
            session.names[name] = None
            session.seen.pop(name, None)
            self.touched = True
        named = isinstance(params, Mapping)
        _, keys, count = _numbered(sql, named)
        values = [params[key] for key in keys] if named else list(params)  # type: ignore[call-overload]
        if len(values) != count:
            raise ValueError(f"{count} placeholder(s) for {len(values)} value(s)")
        marks = f"({', '.join(['%s'] * len(values))})" if values else ""
        return [*ahead, (f"EXECUTE {name}{marks}", values)]

    def failed(self, exc: BaseException) -> None:
        """The query raised: when it held a ``PREPARE`` or ``DEALLOCATE``, or an ``EXECUTE``
        found its name gone, which names the session holds is no longer known."""
        lost = {getattr(exc, "sqlstate", None), getattr(exc.__cause__, "sqlstate", None)}
        if self.session is not None and (self.touched or _NOT_PREPARED in lost):
            self.session.unsure = True


def _reread(raw: Any, session: _Session) -> None:
    """What the session really holds, outside any transaction. Names this process did not
    expect (a PREPARE whose query failed after it ran) go first in line for deallocation;
    names it lost are prepared again on their next use."""
    with raw.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE name LIKE %s",
            [PREFIX.replace("_", "\\_") + "%"],
        )
        present = {name for (name,) in cursor.fetchall()}
    kept = [name for name in session.names if name in present]
    for name in session.names:
        if name not in present:
            session.seen[name] = None
    session.names = OrderedDict.fromkeys([*sorted(present - set(kept)), *kept])
    session.unsure = False


def held(connection: BaseDatabaseWrapper) -> list[str]:
    """The names this process believes the connection's session holds (tests)."""
    raw = connection.connection
    session = _SESSIONS.get(raw) if raw is not None else None
    return list(session.names) if session is not None else []
