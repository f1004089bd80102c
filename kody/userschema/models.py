"""The registry of per-user schemas, in ``public``.

One row per user with actor state. Unlike the original's Durable Objects, this makes every
user's actor state enumerable for fleet work (upgrades, alarms, purges); the request path
still only ever addresses one user.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.utils import timezone


class UserSchema(models.Model):
    user_id = models.CharField(max_length=255, primary_key=True)
    schema_name = models.CharField(max_length=63, unique=True)
    version = models.PositiveIntegerField()
    # The earliest wake-up any actor of this user asked for; swept by the actor_alarms lane.
    alarm_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    upgraded_at = models.DateTimeField(default=timezone.now)
    # The deletion tombstone: set when the account is marked for deletion (only deletion-safe
    # methods run from then on); after the schema is purged the row stays, version 0, so
    # nothing can recreate the schema; cleared by ``finish_deletion``.
    deleting_at = models.DateTimeField(null=True, blank=True)
    # The actors whose tables this schema holds (``kody.userschema.tablesets``); NULL: all.
    table_sets = ArrayField(models.CharField(max_length=200), null=True, blank=True)
    # The last day (app clock, UTC) an actor call found this user (set at most once a day
    # per process); idle users are hibernated (``kody.userschema.hibernation``).
    active_on = models.DateField(null=True, blank=True)
    # Set while the schema is packed into ``kody_schema_archives`` and dropped.
    hibernated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "kody_user_schemas"
        indexes = [
            models.Index(
                fields=["alarm_at"],
                condition=Q(alarm_at__isnull=False),
                name="kody_user_schemas_alarm_ix",
            ),
            models.Index(fields=["version", "user_id"], name="kody_user_schemas_version_ix"),
        ]

    def __str__(self) -> str:
        return self.schema_name


class SchemaArchive(models.Model):
    """A hibernated user's schema in one row: every table as COPY text, zlib-compressed JSON.
    Exactly one of the schema and this row exists for a user (both change in one
    transaction)."""

    user_id = models.CharField(max_length=255, primary_key=True)
    version = models.PositiveIntegerField()
    table_sets = ArrayField(models.CharField(max_length=200), null=True, blank=True)
    data = models.BinaryField()
    rows = models.BigIntegerField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "kody_schema_archives"

    def __str__(self) -> str:
        return f"archive of {self.user_id}"
