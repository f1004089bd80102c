"""Durable alarms: each actor's next wake time lives in its user's schema, the earliest one in
the registry's indexed ``alarm_at``; the ``actor_alarms`` lane casts ``fire`` for due users.

A cast lost in the broker loses nothing: ``alarm_at`` stays due until ``fire`` has run, so the
next tick casts again. The cast's idempotency key names the alarm time, so a duplicate cast for
the same alarm is answered from its call record.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.db import connections, transaction
from django.db.models import Q

from kody.actors.base import Actor, actor_named, sync_registry_alarm
from kody.actors.errors import UnknownActor
from kody.userschema.models import UserSchema

log = logging.getLogger("kody.actors")


class AlarmClock(Actor):
    name = "kody.AlarmClock"

    def fire(self) -> list[str]:
        """Run ``alarm()`` of every actor of this user whose wake time has passed."""
        fired = []
        with connections[self.context.using].cursor() as cursor:
            cursor.execute("DELETE FROM actor_alarms WHERE at <= now() RETURNING actor")
            due = sorted(row[0] for row in cursor.fetchall())
            for name in due:
                if self._wake(name):
                    fired.append(name)
            sync_registry_alarm(cursor, self.user_id)
        return fired

    def _wake(self, name: str) -> bool:
        try:
            actor = actor_named(name)
        except UnknownActor:
            log.warning("alarm for unknown actor %s dropped", name)
            return False
        # One failing alarm must not take the others down; it stays due for the next tick.
        try:
            with transaction.atomic(using=self.context.using):
                actor(self.context).alarm()
        except Exception:
            log.exception("alarm of %s for %s failed; retrying next tick", name, self.schema)
            with connections[self.context.using].cursor() as cursor:
                cursor.execute(
                    "INSERT INTO actor_alarms (actor, at) VALUES (%s, now())"
                    " ON CONFLICT DO NOTHING",
                    [name],
                )
            return False
        return True


def due_alarms(
    now: datetime, after: tuple[datetime, str] | None, limit: int
) -> list[tuple[str, datetime]]:
    """Users whose alarm is due, oldest first, keyset-paged by (alarm_at, user_id)."""
    rows = UserSchema.objects.filter(alarm_at__lte=now)
    if after is not None:
        at, user_id = after
        rows = rows.filter(Q(alarm_at__gt=at) | Q(alarm_at=at, user_id__gt=user_id))
    return list(rows.order_by("alarm_at", "user_id").values_list("user_id", "alarm_at")[:limit])


def cast_alarm(user_id: str, alarm_at: datetime) -> str:
    return AlarmClock.cast(
        user_id, "fire", idempotency_key=f"alarm:{user_id}:{alarm_at.isoformat()}"
    )
