"""``enqueue`` (inside the caller's transaction) and ``relay`` (after it, at least once)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, transaction

from kody.actors.wire import dumps

log = logging.getLogger("kody.outbox")

TABLE = "kody_outbox"
# A claimed message becomes due again after this, in case its relay died while running it.
CLAIM_LEASE = timedelta(minutes=5)
BACKOFF_BASE_SECONDS = 5
BACKOFF_MAX_SECONDS = 3600
MAX_KEY_LENGTH = 255


@dataclass(frozen=True)
class RelayReport:
    sent: int = 0
    failed: int = 0

    @property
    def handled(self) -> int:
        return self.sent + self.failed


def enqueue(task: str, payload: dict[str, Any], *, key: str, using: str = DEFAULT_DB_ALIAS) -> bool:
    """Write an effect in the current transaction; True if it was new (an existing ``key``
    adds nothing). ``task`` is a registered Celery task name; ``payload`` its keyword
    arguments, as JSON. After COMMIT the relay is kicked at once; if that is lost, the
    ``outbox_relay`` lane finds the message on its next tick."""
    if not task:
        raise ValueError("an outbox message names its task")
    if not key or len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"an outbox key is 1 to {MAX_KEY_LENGTH} characters")
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {TABLE} (key, task, payload, created_at, available_at, attempts,"
            " last_error) VALUES (%s, %s, %s::jsonb, now(), now(), 0, '')"
            " ON CONFLICT (key) DO NOTHING RETURNING id",
            [key, task, dumps(payload)],
        )
        added = cursor.fetchone() is not None
    if added:
        transaction.on_commit(_kick, using=using)
    return added


def _kick() -> None:
    """Relay soon, on the default queue. Best effort: the lane is the guarantee."""
    try:
        from kody.outbox.tasks import relay_outbox

        relay_outbox.apply_async()
    except Exception as exc:  # the broker is down: the lane relays it later
        log.warning("outbox relay kick not sent (%s); the lane will relay", type(exc).__name__)


def relay(limit: int = 100, using: str = DEFAULT_DB_ALIAS) -> RelayReport:
    """Run up to ``limit`` due messages, oldest first, each outside any transaction (a task
    may call the network). Safe to run from several processes at once: each message is
    claimed (``FOR UPDATE SKIP LOCKED`` + a lease) before it runs."""
    if connections[using].in_atomic_block:
        raise RuntimeError("relay runs outside any transaction: its tasks commit on their own")
    sent = failed = 0
    for _ in range(limit):
        claimed = _claim(using)
        if claimed is None:
            break
        message_id, task, payload, attempts = claimed
        try:
            _run(task, json.loads(payload) if isinstance(payload, str) else payload)
        except Exception as exc:
            failed += 1
            _failed(message_id, task, attempts, exc, using)
        else:
            sent += 1
            with connections[using].cursor() as cursor:
                cursor.execute(f"DELETE FROM {TABLE} WHERE id = %s", [message_id])
    return RelayReport(sent, failed)


def _claim(using: str) -> tuple[int, str, dict[str, Any], int] | None:
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET available_at = now() + %s, attempts = attempts + 1"
            f" WHERE id = (SELECT id FROM {TABLE} WHERE available_at <= now()"
            "  ORDER BY available_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " RETURNING id, task, payload, attempts",
            [CLAIM_LEASE],
        )
        return cursor.fetchone()


def _run(task: str, payload: dict[str, Any]) -> None:
    from celery import current_app

    try:
        handler = current_app.tasks[task]
    except KeyError:
        raise LookupError(f"no Celery task named {task!r}") from None
    handler(**payload)  # runs here, synchronously (the task's own body, no broker)


def _failed(message_id: int, task: str, attempts: int, exc: Exception, using: str) -> None:
    delay = min(BACKOFF_MAX_SECONDS, BACKOFF_BASE_SECONDS * 2 ** (attempts - 1))
    log.warning(
        "outbox task=%s id=%s attempt=%s failed (%s); retrying in %ss",
        task,
        message_id,
        attempts,
        type(exc).__name__,
        delay,
    )
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET available_at = now() + %s, last_error = %s WHERE id = %s",
            # The class name only: exception messages can quote user content.
            [timedelta(seconds=delay), type(exc).__name__, message_id],
        )
