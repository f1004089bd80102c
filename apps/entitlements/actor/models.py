"""UserMeter's tables in each user's schema (SCHEMA.md §2.1). No user_id: the schema is the user."""

from __future__ import annotations

from django.db import models

from kody.userschema import ActorModel


class DailyCounter(ActorModel):
    """Authoritative per-UTC-day counters, pruned after seven days by the meter itself."""

    pk = models.CompositePrimaryKey("resource", "day")
    resource = models.CharField(max_length=64)
    day = models.DateField()
    count = models.BigIntegerField(db_default=0)
    revision = models.BigIntegerField(db_default=0)
    updated_at = models.DateTimeField(db_default=models.functions.Now())

    # Schema v2 added the monotonic revision and the day index the pruning uses.
    actor_added = {"revision": 2, "daily_counters_day_ix": 2}

    class Meta:
        db_table = "daily_counters"
        indexes = [models.Index(fields=["day"], name="daily_counters_day_ix")]
