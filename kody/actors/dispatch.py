"""``call`` and ``cast``: route a call to the user's shard queue, or run it inline; a
``@reads`` method runs here, beside the writer (``kody.actors.readonly``).

Both are every surface's way into an actor, so both turn an unreachable broker (or, inline,
an unreachable database) into ``ActorUnavailable`` — a typed 503 carrying the call's
idempotency key to retry with — never a bare connection error (a 500).
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from django.conf import settings
from django.db import InterfaceError, OperationalError

from kody.actors import transport
from kody.actors.base import Actor, is_read, method_of
from kody.actors.errors import ActorCallTimeout, ActorUnavailable
from kody.actors.wire import Call, Outcome, unwrap
from kody.userschema.naming import schema_name_for

log = logging.getLogger("kody.actors")

MAX_KEY_LENGTH = 160


def call_id_for(user_id: str, key: str) -> str:
    """The wire id of a call: its idempotency key scoped to the user.

    The id names the call's record (``actor_calls``) and its reply (``actors.reply.…``), so
    two users who pick the same key must get different ids, or one could be answered with the
    other's outcome. A key generated for a call (``new_key``) is scoped the same way, so the
    key a timeout names (``ActorCallTimeout.call_id``) finds the first attempt's record."""
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"an idempotency key is 1 to {MAX_KEY_LENGTH} characters")
    return f"{key}~{hashlib.blake2b(user_id.encode(), digest_size=8).hexdigest()}"


def new_key() -> str:
    """A random idempotency key for a call made without one (returned by ``cast``, named by
    ``ActorUnavailable`` and ``ActorCallTimeout``: retrying with it applies the call once).
    32 random hex digits, like the ``uuid4().hex`` it replaces, without building a UUID."""
    return os.urandom(16).hex()


def _build(
    actor: type[Actor],
    user_id: str,
    method: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    key: str,
    reply: bool,
) -> Call:
    method_of(actor, method)
    return Call(
        id=call_id_for(user_id, key),
        user_id=user_id,
        schema=schema_name_for(user_id),
        actor=actor.name,
        method=method,
        args=list(args),
        kwargs=dict(kwargs),
        reply=reply,
    )


# Raised by a cluster client while slots move or a node is down (not ConnectionError).
_CLUSTER_OUTAGES = ("ClusterDownError", "TryAgainError", "MasterDownError", "BusyLoadingError")


def _outage(exc: BaseException) -> bool:
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OperationalError)):
        return True
    if isinstance(exc, InterfaceError):
        return True
    return isinstance(exc, redis.RedisError) and type(exc).__name__ in _CLUSTER_OUTAGES


@contextmanager
def _unavailable_as_typed(call: Call, key: str, what: str) -> Iterator[None]:
    """Turn an unreachable broker or database into ActorUnavailable, naming the key to retry
    with (the caller's own, or the one generated for this call)."""
    try:
        yield
    except Exception as exc:
        _raise_if_outage(exc, call, key, what)
        raise


def _raise_if_outage(exc: Exception, call: Call, key: str, what: str) -> None:
    if not _outage(exc):
        return
    log.warning("actor %s unavailable for %s.%s: %s", what, call.actor, call.method, exc)
    raise ActorUnavailable(details={"idempotency_key": key, "retry_after_seconds": 5}) from exc


# Values JSON gives back exactly as they went in (by exact type: a subclass such as an
# ``IntEnum`` or a ``StrEnum`` comes back as its base type).
_JSON_EXACT = frozenset({str, int, float, bool, type(None)})


def _as_off_the_queue(call: Call) -> Call:
    """``call`` as a shard worker would see it: encoded to JSON and decoded again, so its
    arguments reach the method exactly as they would off the queue (a date becomes its ISO
    text, a tuple a list). Arguments that are all plain scalars come back the same: then the
    round trip is skipped (``_build`` already copied the argument list and dict)."""
    types = _JSON_EXACT
    if all(type(value) in types for value in call.args) and all(
        type(name) is str and type(value) in types for name, value in call.kwargs.items()
    ):
        return call
    return Call.decode(call.encode())


def _run_inline(call: Call, key: str) -> Outcome:
    from kody.actors.runtime import execute

    # Arguments reach the method exactly as they would off the queue.
    with _unavailable_as_typed(call, key, "database"):
        return execute([_as_off_the_queue(call)])[0]


def _run_read(actor: type[Actor], call: Call, key: str) -> Any:
    """A ``@reads`` call on this connection, then the housekeeping it asked for, cast."""
    from kody.actors.readonly import execute_read

    with _unavailable_as_typed(call, key, "database"):
        outcome, follow_ups = execute_read(_as_off_the_queue(call))
    for method, kwargs in follow_ups:
        try:
            cast(actor, call.user_id, method, (), kwargs)
        except Exception:  # housekeeping is opportunistic: the next read asks again
            log.warning("follow-up %s.%s of a read not sent", actor.name, method, exc_info=True)
    return outcome.unwrap()


def call(
    actor: type[Actor],
    user_id: str,
    method: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    timeout: float | None = None,
    key: str | None = None,
) -> Any:
    key = new_key() if key is None else key
    message = _build(actor, user_id, method, args, kwargs, key, reply=True)
    if is_read(actor, method):
        return _run_read(actor, message, key)
    if settings.KODY_ACTORS_INLINE:
        return _run_inline(message, key).unwrap()
    wait = float(timeout if timeout is not None else settings.KODY_ACTOR_CALL_TIMEOUT)
    if wait <= 0:
        raise ValueError("timeout must be positive")
    shard = transport.shard_for(user_id)
    try:  # ``_unavailable_as_typed`` without a generator's set-up on the hot path
        reply = transport.push_and_wait(shard, message.encode(), message.id, wait)
    except Exception as exc:
        _raise_if_outage(exc, message, key, "broker")
        raise
    if reply is None:
        # ``call_id`` is the key to retry with (the caller's own, or the one generated here).
        raise ActorCallTimeout(actor.name, method, key, wait)
    return unwrap(reply)


def cast(
    actor: type[Actor],
    user_id: str,
    method: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    *,
    key: str | None = None,
) -> str:
    """Queue a call and return its idempotency key (generated if not given) without waiting:
    casting again with it re-applies nothing. Inline mode runs it now and logs (does not
    raise) a failure, as a worker would. A ``@reads`` method is never cast (``TypeError``):
    it has nothing to do without its reply."""
    if is_read(actor, method):
        raise TypeError(f"{actor.name}.{method} only reads: call it, a cast would do nothing")
    key = new_key() if key is None else key
    message = _build(actor, user_id, method, args, kwargs, key, reply=False)
    if settings.KODY_ACTORS_INLINE:
        outcome = _run_inline(message, key)
        if not outcome.ok:
            log.warning("inline cast %s.%s failed: %s", actor.name, method, outcome.text[:500])
        return key
    with _unavailable_as_typed(message, key, "broker"):
        transport.push(transport.shard_for(user_id), message.encode())
    return key
