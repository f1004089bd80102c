"""The ``Actor`` base class: a user's single writer, the replacement for a Durable Object.

Subclass it, and every public method you define becomes a call that runs in one transaction
holding the user's owner-row lock, with ``search_path`` on the user's schema::

    class UserMeter(Actor):
        name = "entitlements.UserMeter"

        def consume(self, resource: str, day: str, limit: int) -> dict: ...

    UserMeter.call(user_id, "consume", resource="execute_calls_per_day", day="2026-11-29",
                   limit=500)
    UserMeter.cast(user_id, "prune")   # returns at once

A method marked ``@reads`` only reads: it runs on the caller's own connection, in a read-only
snapshot, beside the user's single writer instead of in its queue (``kody.actors.readonly``).

Declare the actor models a subclass uses in ``tables``: they are created for a user the first
time the actor runs for them, so a user who never gets mail has no mail tables.

Arguments and results travel as JSON. A method may use the ORM on actor models and on public
models alike (both are on the search path) and must not do non-transactional side effects
directly: write them to the outbox (``kody.outbox.enqueue``), which commits with the call and
relays them at least once; ``transaction.on_commit`` work is lost if the worker dies right
after COMMIT.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

from django.db import DEFAULT_DB_ALIAS, connections

from kody.actors.errors import UnknownActor, UnknownMethod
from kody.userschema import tablesets
from kody.userschema.models import UserSchema

RESERVED_PARAMETERS = frozenset({"timeout", "idempotency_key"})

_registry: dict[str, type[Actor]] = {}


@dataclass(frozen=True)
class CallContext:
    user_id: str
    schema: str
    call_id: str
    using: str = DEFAULT_DB_ALIAS
    # A ``@reads`` method running beside the writer (read-only snapshot): what it writes
    # fails, and the housekeeping it asks for (``Actor.follow_up``) is cast after it ends.
    read_only: bool = False
    follow_ups: list[tuple[str, dict[str, Any]]] = field(default_factory=list)


class Actor:
    name: ClassVar[str] = ""
    # The actor models this actor uses: created in a user's schema the first time the actor
    # runs for that user (``kody.userschema.tablesets``). Empty: it uses only the tables
    # every schema has (the kernel's, and actor models no actor claims).
    tables: ClassVar[tuple[type, ...]] = ()
    _exposed: ClassVar[frozenset[str] | None] = None

    def __init__(self, context: CallContext) -> None:
        self.context = context

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__dict__.get("name"):
            cls.name = f"{cls.__module__}.{cls.__qualname__}"
        for method in cls.exposed_methods():
            clash = RESERVED_PARAMETERS & set(inspect.signature(getattr(cls, method)).parameters)
            if clash:
                raise TypeError(f"{cls.name}.{method} uses reserved parameter names {clash}")
        existing = _registry.get(cls.name)
        if existing is not None and existing.__qualname__ != cls.__qualname__:
            raise TypeError(f"two actors are named {cls.name!r}")
        _registry[cls.name] = cls
        if cls.tables:
            tablesets.declare(cls.name, cls.tables)

    @property
    def user_id(self) -> str:
        return self.context.user_id

    @property
    def schema(self) -> str:
        return self.context.schema

    @classmethod
    def exposed_methods(cls) -> frozenset[str]:
        exposed = cls.__dict__.get("_exposed")
        if exposed is None:
            names: set[str] = set()
            for klass in cls.__mro__:
                if klass is Actor:
                    break
                names.update(
                    attr
                    for attr, value in vars(klass).items()
                    if not attr.startswith("_") and inspect.isfunction(value)
                )
            exposed = frozenset(names - {"alarm"})
            cls._exposed = exposed
        return exposed

    @classmethod
    def call(
        cls,
        user_id: str,
        method: str,
        *args: Any,
        timeout: float | None = None,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> Any:
        from kody.actors.dispatch import call

        return call(cls, user_id, method, args, kwargs, timeout=timeout, key=idempotency_key)

    @classmethod
    def cast(
        cls,
        user_id: str,
        method: str,
        *args: Any,
        idempotency_key: str | None = None,
        **kwargs: Any,
    ) -> str:
        from kody.actors.dispatch import cast

        return cast(cls, user_id, method, args, kwargs, key=idempotency_key)

    def follow_up(self, method: str, **kwargs: Any) -> None:
        """Housekeeping a method found to do (an opportunistic prune): done now by a method
        running as the writer; by a ``@reads`` method — which cannot write — cast to the
        writer once the read has ended (``kody.actors.readonly``). It may run more than once."""
        method_of(type(self), method)
        if self.context.read_only:
            self.context.follow_ups.append((method, kwargs))
        else:
            getattr(self, method)(**kwargs)

    def alarm(self) -> None:
        """Called on this actor's shard after ``set_alarm`` time passes. Override it."""

    def set_alarm(self, at: datetime) -> None:
        """Wake ``alarm()`` at ``at`` or earlier; never postpones an alarm already set."""
        with connections[self.context.using].cursor() as cursor:
            cursor.execute(
                "INSERT INTO actor_alarms (actor, at) VALUES (%s, %s) ON CONFLICT (actor)"
                " DO UPDATE SET at = LEAST(actor_alarms.at, EXCLUDED.at)",
                [self.name, at],
            )
            cursor.execute(
                f"UPDATE {UserSchema._meta.db_table} SET alarm_at = LEAST(alarm_at, %s)"
                " WHERE user_id = %s",
                [at, self.user_id],
            )

    def clear_alarm(self) -> None:
        with connections[self.context.using].cursor() as cursor:
            cursor.execute("DELETE FROM actor_alarms WHERE actor = %s", [self.name])
            sync_registry_alarm(cursor, self.user_id)


def sync_registry_alarm(cursor: Any, user_id: str) -> None:
    cursor.execute(
        f"UPDATE {UserSchema._meta.db_table} SET alarm_at = (SELECT min(at) FROM actor_alarms)"
        " WHERE user_id = %s",
        [user_id],
    )


def deletion_safe(method: Any) -> Any:
    """Mark an actor method as one an account deletion needs (purge, export pages, blob
    references, lease drain). While a user is marked for deletion the kernel runs only these
    and refuses every other method with a typed error."""
    method.kody_deletion_safe = True
    return method


def is_deletion_safe(actor: type[Actor], method: str) -> bool:
    return bool(getattr(getattr(actor, method, None), "kody_deletion_safe", False))


def reads(method: Any) -> Any:
    """Mark an actor method that only reads its user's state. It runs on the caller's own
    connection in a read-only snapshot (``kody.actors.readonly``): no queue round trip, no owner
    lock, no call record, nothing for the single writer to do. It sees every write committed
    before it starts (so every write its caller made through ``call``), not casts still queued.
    A write inside it fails (the transaction is read-only); housekeeping goes through
    ``Actor.follow_up``. A read is never cast: it has nothing to do without its reply."""
    method.kody_reads = True
    return method


def is_read(actor: type[Actor], method: str) -> bool:
    return bool(getattr(getattr(actor, method, None), "kody_reads", False))


class Planned(tuple):  # type: ignore[type-arg]
    """A method's whole effect as one statement, given as its CTEs and its final query:
    ``WITH <ctes> <select>``, still the ``(sql, params)`` pair a cursor takes. The final
    query returns at most one row with one column, ``value``: the method's return value as
    JSON text. The kernel joins the call's record to it as one more CTE, so the call, its
    record and its commit are one round trip. ``params`` are named (``%(name)s``); names
    starting with ``kody_`` are the kernel's."""

    ctes: str
    select: str

    def __new__(cls, ctes: str, select: str, params: dict[str, Any]) -> Planned:
        if not isinstance(params, dict):
            raise TypeError("a Planned statement takes named parameters")
        self = super().__new__(cls, (f"WITH {ctes}\n{select}", params))
        self.ctes = ctes
        self.select = select
        return self

    @property
    def params(self) -> dict[str, Any]:
        return self[1]  # type: ignore[no-any-return]


def one_statement(plan: Any) -> Any:
    """Mark a method whose whole effect is one statement: ``plan(*args, **kwargs)`` builds it
    as a ``Planned`` (on the user's search path), or None when this call needs the method.
    Calls of such methods take the one-statement path (``kody.actors.one_statement_path``); a
    statement that returns no row rolls the batch back and the methods run themselves.
    ``plan`` must be a pure function of its arguments, and the method must do exactly what the
    statement does when it returns a row — the simplest way is to run that same statement."""

    def mark(method: Any) -> Any:
        method.kody_statement = plan
        return method

    return mark


def statement_form(actor: type[Actor], method: str) -> Any:
    return getattr(getattr(actor, method, None), "kody_statement", None)


def actor_named(name: str) -> type[Actor]:
    try:
        return _registry[name]
    except KeyError:
        raise UnknownActor(f"no actor named {name!r}") from None


def method_of(actor: type[Actor], method: str) -> str:
    if method not in actor.exposed_methods():
        raise UnknownMethod(f"{actor.name} has no callable method {method!r}")
    return method
