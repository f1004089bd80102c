"""The kernel's own tables inside every user schema."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.userschema.actor_models import ActorModel


class ActorOwner(ActorModel):
    """Singleton row: whose schema this is. Every call locks it and checks the id."""

    id = models.SmallIntegerField(primary_key=True, default=1)
    owner_id = models.CharField(max_length=255)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "actor_owner"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="actor_owner_singleton")]


class ActorCall(ActorModel):
    """Every call's outcome under its idempotency key: a redelivery re-applies nothing."""

    # Collation "C": a machine-made key compares bytewise, with no locale rules. (Django's
    # varchar_pattern_ops "_like" index on this key is not created: the actor DDL compiler
    # skips them, kody/userschema/ddl.py.)
    id = models.CharField(max_length=200, primary_key=True, db_collation="C")
    actor = models.CharField(max_length=200)
    method = models.CharField(max_length=100)
    outcome = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "actor_calls"
        indexes = [models.Index(fields=["created_at"], name="actor_calls_created_ix")]


class ActorAlarm(ActorModel):
    """Each actor's next wake time; the registry's ``alarm_at`` is the minimum of these."""

    actor = models.CharField(max_length=200, primary_key=True, db_collation="C")
    at = models.DateTimeField()

    class Meta:
        db_table = "actor_alarms"
