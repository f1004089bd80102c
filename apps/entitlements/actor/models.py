"""UserMeter's tables in each user's schema (SCHEMA.md §2.1). No user_id: the schema is the user.

Versions are the per-user schema's (``kody.userschema``): ``actor_version`` says which version
introduced a table, ``actor_added`` which version added a later part. ``USER_METER_VERSION`` in
``meter.py`` is what the meter records in ``user_meter_meta``.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.userschema import ActorModel

# The version that brought the full meter (everything but the daily counters).
FULL_METER = 3


class MeterMeta(ActorModel):
    """Small integer facts about this meter; holds ``schema_version``."""

    key = models.CharField(max_length=64, primary_key=True, db_collation="C")
    value = models.BigIntegerField()

    actor_version = FULL_METER

    class Meta:
        db_table = "user_meter_meta"


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


class InboundDeliveryClaim(ActorModel):
    """One row per inbound delivery id already charged, so a retried delivery is free."""

    delivery_id = models.CharField(max_length=255, primary_key=True, db_collation="C")
    resource = models.CharField(max_length=64)
    day = models.DateField()
    count_after = models.BigIntegerField()
    revision = models.BigIntegerField()
    claimed_at = models.DateTimeField(db_default=models.functions.Now())

    actor_version = FULL_METER

    class Meta:
        db_table = "inbound_delivery_claims"
        indexes = [models.Index(fields=["day"], name="inbound_claims_day_ix")]


class StorageBytesState(ActorModel):
    """Singleton: the authoritative payload-byte counter (never time-pruned)."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    bytes = models.BigIntegerField(db_default=0)
    revision = models.BigIntegerField(db_default=0)
    updated_at = models.DateTimeField(db_default=models.functions.Now())

    actor_version = FULL_METER

    class Meta:
        db_table = "storage_bytes_state"
        constraints = [
            models.CheckConstraint(condition=Q(id=1), name="storage_bytes_singleton"),
            models.CheckConstraint(condition=Q(bytes__gte=0), name="storage_bytes_non_negative"),
        ]


class PackageServiceState(ActorModel):
    """Authoritative liveness of the user's package services (the running count's source).

    Named apart from the public ``package_service_states`` enumeration index: actor and
    public tables share one search path, so their names must differ.
    """

    pk = models.CompositePrimaryKey("package_id", "service_name")
    package_id = models.CharField(max_length=255)
    service_name = models.CharField(max_length=255)
    status = models.CharField(max_length=16)
    mode = models.CharField(max_length=16, db_default="persistent")
    started_at = models.DateTimeField(null=True)
    source_updated_at = models.DateTimeField(null=True)
    revision = models.BigIntegerField(db_default=0)
    updated_at = models.DateTimeField(db_default=models.functions.Now())

    actor_version = FULL_METER

    class Meta:
        db_table = "meter_package_service_states"
        indexes = [
            models.Index(fields=["status", "source_updated_at"], name="meter_services_status_ix")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=["running", "idle", "stopped", "error"]),
                name="meter_services_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(mode__in=["bounded", "persistent"]), name="meter_services_mode_valid"
            ),
        ]


# --- room for the deletion issue (write leases and the deletion fence) ------------------------


class DeletionState(ActorModel):
    """Singleton deletion tombstone; ``purge`` keeps it while cleanup is still running."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    deleting_at = models.DateTimeField(null=True)

    actor_version = FULL_METER

    class Meta:
        db_table = "deletion_state"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="deletion_state_singleton")]


class AccountWriteLease(ActorModel):
    """An in-flight guarded write; deletion waits for these to drain (deletion issue)."""

    token = models.CharField(max_length=255, primary_key=True, db_collation="C")
    holder = models.CharField(max_length=255)
    acquired_at = models.DateTimeField()
    pending_repair_id = models.CharField(max_length=255, null=True)  # noqa: DJ001 (original shape)

    actor_version = FULL_METER

    class Meta:
        db_table = "account_write_leases"
        indexes = [models.Index(fields=["acquired_at", "token"], name="write_leases_acquired_ix")]
