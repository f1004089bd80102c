"""A planned batch's statements and its prelude's owner locks as per-schema prepared
statements (ADR 0038).

Design note. A planned call (``kody.actors.base.one_statement``) is the same SQL text for
every user, on that user's search path; Postgres parses and plans it again for every call,
and for the meter's charge that is more work than running it (0.07–0.13 ms planning against
0.04 ms execution). A session-level ``PREPARE`` cannot be shared across users: Postgres
re-parses a prepared statement whenever ``search_path`` differs from its last use, so one
name for every schema would be planned on every call anyway. Each (schema, SQL) pair gets its
own name instead (``kp_`` and a digest: a schema name alone fills an identifier), prepared
the second time this database session sees the pair, so a user seen once costs nothing
extra, and executed with the planned call's values as literals (``EXECUTE kp_…(…)``): still
one statement of the batch's one query. The prelude's owner-lock checks (schema-qualified,
the owner id as ``$1``: ``runtime.owner_lock``) go the same way, one per user
(``Batch.literal``). Postgres plans its first five runs and then keeps a
generic plan; DDL on the tables (an upgrade, a table set created, hibernation) re-plans it by
itself, and a dropped schema fails the ``EXECUTE`` like the statement would fail.

Which names a session holds is tracked per raw psycopg connection (weakly: a reconnect, as
``kody.actors.recycle`` makes, starts afresh), at most ``KODY_ACTOR_PREPARED_MAX`` of them;
the least recently used one is ``DEALLOCATE``d in the query that prepares one more. 0
turns it off (for a transaction-mode pooler that hands a session's statements to another
backend). ``PREPARE`` and ``DEALLOCATE`` are not transactional: when the query holding them
fails, which of them ran is unknown, so the session is marked unsure and the next query reads
``pg_prepared_statements`` first (one round trip, after a failure only). A session that lost
its statements under us (``DISCARD ALL``) fails the ``EXECUTE``; the batch then runs the
plain way, as on any failure of the planned query, and the next one re-reads what is there.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.db.backends.base.base import BaseDatabaseWrapper

from kody.userschema.scope import Statement

PREFIX = "kp_"
# invalid_sql_statement_name: an EXECUTE of a name the session does not hold.
_NOT_PREPARED = "26000"
_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%s|%%")
_PARAMETER = re.compile(r"\$(\d+)")


class _Session:
    """One database session's prepared names (least recently used first), and the pairs it
    has seen once."""

    def __init__(self) -> None:
        self.names: OrderedDict[str, None] = OrderedDict()
        self.seen: OrderedDict[str, None] = OrderedDict()
        self.unsure = False


_SESSIONS: weakref.WeakKeyDictionary[Any, _Session] = weakref.WeakKeyDictionary()


def limit() -> int:
    return max(0, int(getattr(settings, "KODY_ACTOR_PREPARED_MAX", 0)))


@functools.lru_cache(maxsize=4096)
def name_for(schema: str, sql: str) -> str:
    digest = hashlib.blake2b(f"{schema}\x00{sql}".encode(), digest_size=12).hexdigest()
    return PREFIX + digest


def numbered(sql: str, params: Sequence[Any] | Mapping[str, Any]) -> tuple[str, list[Any]]:
    """``sql`` with psycopg's placeholders (``%s`` or ``%(name)s``, and ``%%``) as ``$n``,
    and the values in that order (a name used twice is one parameter)."""
    named = isinstance(params, Mapping)
    body, keys, count = _shape(sql, named)
    if named:
        return body, [params[key] for key in keys]  # type: ignore[call-overload]
    values = list(params)
    if len(values) != count:
        raise ValueError(f"{count} placeholder(s) for {len(values)} value(s)")
    return body, values


@functools.lru_cache(maxsize=256)
def _shape(sql: str, named: bool) -> tuple[str, tuple[str, ...], int]:
    """``numbered``'s text, the names in ``$n`` order and how many ``$n`` there are: worked
    out once per SQL text (the planned statements are a handful of constants)."""
    keys: list[str] = []
    count = 0

    def number(match: re.Match[str]) -> str:
        nonlocal count
        if match.group(0) == "%%":
            return "%"
        key = match.group(1)
        if (key is not None) != named:
            raise ValueError("named and positional placeholders cannot be mixed")
        if key is None:
            count += 1
            return f"${count}"
        if key not in keys:
            keys.append(key)
        return f"${keys.index(key) + 1}"

    body = _PLACEHOLDER.sub(number, sql)
    return body, tuple(keys), len(keys) if named else count


class Batch:
    """The prepared statements of one transaction's prelude and planned query on one
    connection: ``wrap`` each planned statement, ``literal`` each check; ``failed(exc)`` if
    the query that carried them raised."""

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.maximum = limit()
        self.session: _Session | None = None
        self.touched = False  # a PREPARE or DEALLOCATE is in the query
        if self.maximum:
            connection.ensure_connection()
            raw = connection.connection
            session = _SESSIONS.get(raw)
            if session is None:
                session = _SESSIONS[raw] = _Session()
            # Still unsure (``settle`` was not called before the transaction): send plain.
            self.session = None if session.unsure else session

    def wrap(self, schema: str, statement: Statement) -> tuple[list[Statement], int]:
        """The statements that run ``statement`` for ``schema`` (a ``DEALLOCATE`` of the
        oldest name and a ``PREPARE`` first when needed) and which of them answers rows."""
        sql, params = statement
        ahead, name = self._name(schema, sql, lambda: numbered(sql, params)[0])
        if name is None:
            return [statement], 0
        _, values = numbered(sql, params)
        if values:
            execute: Statement = (f"EXECUTE {name}({', '.join(['%s'] * len(values))})", values)
        else:
            execute = (f"EXECUTE {name}", ())
        return [*((text, ()) for text in ahead), execute], len(ahead)

    def literal(self, key: str, sql: str, literals: Sequence[str]) -> list[str]:
        """``sql`` (``$n`` placeholders, literal SQL otherwise) run with ``literals`` (SQL
        literals, already quoted) as the statements to send: the plain text with the
        literals in place until the session has seen ``key`` + ``sql`` twice, then its
        prepared statement (``key``: what makes the text one user's, their schema)."""
        ahead, name = self._name(key, sql, lambda: sql)
        if name is None:
            return [_PARAMETER.sub(lambda match: literals[int(match.group(1)) - 1], sql)]
        return [*ahead, f"EXECUTE {name}({', '.join(literals)})"]

    def _name(self, key: str, sql: str, body: Any) -> tuple[list[str], str | None]:
        """The prepared name to run ``sql`` by, and what must go ahead of it (a
        ``DEALLOCATE`` of the oldest name, the ``PREPARE``); None: send it plain."""
        session = self.session
        if session is None:
            return [], None
        name = name_for(key, sql)
        if name in session.names:
            session.names.move_to_end(name)
            return [], name
        if name not in session.seen:
            session.seen[name] = None
            while len(session.seen) > 4 * self.maximum:
                session.seen.popitem(last=False)
            return [], None
        ahead: list[str] = []
        while len(session.names) >= self.maximum:
            oldest, _ = session.names.popitem(last=False)
            ahead.append(f"DEALLOCATE {oldest}")
        ahead.append(f"PREPARE {name} AS {body()}")
        session.names[name] = None
        session.seen.pop(name, None)
        self.touched = True
        return ahead, name

    def failed(self, exc: BaseException) -> None:
        """The query failed: when it held a ``PREPARE`` or ``DEALLOCATE``, which of them ran
        is unknown, and an ``EXECUTE`` failing on a name the session lost means the others
        may be gone too. Either way the next query reads what the session holds first."""
        if self.session is None:
            return
        lost = getattr(getattr(exc, "__cause__", None), "sqlstate", None) == _NOT_PREPARED
        if self.touched or lost or getattr(exc, "sqlstate", None) == _NOT_PREPARED:
            self.session.unsure = True


def settle(connection: BaseDatabaseWrapper) -> None:
    """Before a planned transaction opens: when the last planned query on this session
    failed with a ``PREPARE``, ``DEALLOCATE`` or a lost name in it, read what the session
    really holds (one round trip, outside the transaction, whose first statement must be the
    kernel's own prelude)."""
    raw = connection.connection
    session = _SESSIONS.get(raw) if raw is not None else None
    if session is not None and session.unsure:
        _resync(raw, session)


def _resync(raw: Any, session: _Session) -> None:
    """What the session really holds; names this process did not expect (a PREPARE whose
    query failed after it ran) go first in line to be deallocated."""
    with raw.cursor() as cursor:
        cursor.execute(
            "SELECT name FROM pg_prepared_statements WHERE name LIKE %s",
            [PREFIX.replace("_", "\\_") + "%"],
        )
        present = {name for (name,) in cursor.fetchall()}
    unexpected = sorted(present - set(session.names))
    kept = [name for name in session.names if name in present]
    for name in session.names:
        if name not in present:
            session.seen[name] = None  # lost or never prepared: prepared on its next use
    session.names = OrderedDict((name, None) for name in [*unexpected, *kept])
    session.unsure = False


def held(connection: BaseDatabaseWrapper) -> list[str]:
    """The names this process believes the connection's session holds (for tests and the
    benchmarks)."""
    raw = connection.connection
    session = _SESSIONS.get(raw) if raw is not None else None
    return list(session.names) if session is not None else []
