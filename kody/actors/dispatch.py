"""``call`` and ``cast``: route a call to the user's shard queue, or run it inline."""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings

from kody.actors import transport
from kody.actors.base import Actor, method_of
from kody.actors.errors import ActorCallTimeout
from kody.actors.wire import Call, Outcome, unwrap
from kody.userschema.naming import schema_name_for

log = logging.getLogger("kody.actors")

MAX_KEY_LENGTH = 160


def call_id_for(user_id: str, key: str | None) -> str:
    """The wire id of a call: its idempotency key scoped to the user.

    The id names the call's record (``actor_calls``) and its reply (``actors.reply.…``), so
    two users who pick the same key must get different ids, or one could be answered with the
    other's outcome. A generated key is random and needs no scope."""
    if key is None:
        return uuid.uuid4().hex
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"an idempotency key is 1 to {MAX_KEY_LENGTH} characters")
    return f"{key}~{hashlib.blake2b(user_id.encode(), digest_size=8).hexdigest()}"


def _build(
    actor: type[Actor],
    user_id: str,
    method: str,
    args: Sequence[Any],
    kwargs: Mapping[str, Any],
    key: str | None,
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


def _run_inline(call: Call) -> Outcome:
    from kody.actors.runtime import execute

    # Arguments reach the method exactly as they would off the queue: through JSON.
    return execute([Call.decode(call.encode())])[0]


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
    message = _build(actor, user_id, method, args, kwargs, key, reply=True)
    if settings.KODY_ACTORS_INLINE:
        return _run_inline(message).unwrap()
    wait = float(timeout if timeout is not None else settings.KODY_ACTOR_CALL_TIMEOUT)
    if wait <= 0:
        raise ValueError("timeout must be positive")
    shard = transport.shard_for(user_id)
    reply = transport.push_and_wait(shard, message.encode(), message.id, wait)
    if reply is None:
        # ``call_id`` is the key to retry with (the caller's own, or the one generated here).
        raise ActorCallTimeout(actor.name, method, key or message.id, wait)
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
    raise) a failure, as a worker would."""
    message = _build(actor, user_id, method, args, kwargs, key, reply=False)
    if settings.KODY_ACTORS_INLINE:
        outcome = _run_inline(message)
        if not outcome.ok:
            log.warning("inline cast %s.%s failed: %s", actor.name, method, outcome.text[:500])
        return key or message.id
    transport.push(transport.shard_for(user_id), message.encode())
    return key or message.id
