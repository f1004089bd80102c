"""Durable alarms: each actor's next wake time lives in its user's schema, the earliest one in
the registry's indexed ``alarm_at``; the ``actor_alarms`` lane casts ``fire`` for due users.

A cast lost in the broker loses nothing: ``alarm_at`` stays due until ``fire`` has run, so the
next tick casts again. The cast's idempotency key names the alarm's *arming*: its time and the
registry row's version (Postgres ``xmin``, new on every write of the row — each ``set_alarm``,
``clear_alarm`` and ``fire``). So a duplicate cast of one arming (two ticks before the shard
got to the first) is answered from its call record, while an alarm set again at an instant
that already fired is a new arming and wakes again (keyed by its time alone, it was answered
from the old record and never fired).

One clock decides what is due: the app clock (``django.utils.timezone.now``), which is also
the clock ``set_alarm`` callers use. The lane reads it once and passes it to ``fire`` as a
parameter, so the registry sweep and the per-actor delete agree even when the app clock and
the database clock differ (a shifted test clock, a skewed host).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import NamedTuple

from django.db import connections, transaction
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.utils import timezone

from kody.actors.base import Actor, actor_named, sync_registry_alarm
from kody.actors.errors import UnknownActor
from kody.userschema.models import UserSchema

log = logging.getLogger("kody.actors")


class AlarmClock(Actor):
    name = "kody.AlarmClock"

    def fire(self, now: str | None = None) -> list[str]:
        """Run ``alarm()`` of every actor of this user whose wake time is at or before ``now``
        (ISO 8601, the app clock of whoever found the alarm due; default: this process's)."""
        at = datetime.fromisoformat(now) if now else timezone.now()
        fired = []
        with connections[self.context.using].cursor() as cursor:
            cursor.execute("DELETE FROM actor_alarms WHERE at <= %s RETURNING actor", [at])
            due = sorted(row[0] for row in cursor.fetchall())
            for name in due:
                if self._wake(name, at):
                    fired.append(name)
            sync_registry_alarm(cursor, self.user_id)
        return fired

    def _wake(self, name: str, now: datetime) -> bool:
        try:
            actor = actor_named(name)
        except UnknownActor:
            log.warning("alarm for unknown actor %s dropped", name)
            return False
        # One failing alarm must not take the others down; it stays due for the next tick.
        try:
            with transaction.atomic(using=self.context.using):
                actor(self.context).alarm()
        except BaseException:  # a BaseException too: it must not fail every other alarm
            log.exception("alarm of %s for %s failed; retrying next tick", name, self.schema)
            with connections[self.context.using].cursor() as cursor:
                cursor.execute(
                    "INSERT INTO actor_alarms (actor, at) VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    [name, now],
                )
            return False
        return True


class DueAlarm(NamedTuple):
    user_id: str
    alarm_at: datetime
    arming: str  # the registry row's xmin when the sweep read it


def due_alarms(now: datetime, after: tuple[datetime, str] | None, limit: int) -> list[DueAlarm]:
    """Users whose alarm is due, oldest first, keyset-paged by (alarm_at, user_id)."""
    rows = UserSchema.objects.filter(alarm_at__lte=now, deleting_at__isnull=True)
    if after is not None:
        at, user_id = after
        rows = rows.filter(Q(alarm_at__gt=at) | Q(alarm_at=at, user_id__gt=user_id))
    rows = rows.annotate(arming=RawSQL("xmin::text", ()))
    found = rows.order_by("alarm_at", "user_id").values_list("user_id", "alarm_at", "arming")
    return [DueAlarm(*row) for row in found[:limit]]


def cast_alarm(due: DueAlarm, now: datetime) -> str:
    """Cast ``fire`` for an alarm found due at ``now`` (the sweeping lane's app clock)."""
    return AlarmClock.cast(
        due.user_id,
        "fire",
        now=now.isoformat(),
        idempotency_key=f"alarm:{due.user_id}:{due.alarm_at.isoformat()}:{due.arming}",
    )
