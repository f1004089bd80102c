"""Feature flags: global switches, per-user overrides and daily exposure rollups."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from kody.fields import stable_user_id

# Foreign keys use db_constraint=False: migration 0002 declares them in the database with the
# original ON DELETE action, so raw deletes (account deletion's batch) behave like ORM ones.


class FeatureFlag(models.Model):
    key = models.CharField(max_length=128, primary_key=True)
    enabled = models.BooleanField(default=False)
    rollout_percent = models.IntegerField(null=True, blank=True)
    note = models.TextField(blank=True, default="")
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="updated_by",
        db_constraint=False,
        related_name="+",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "feature_flags"
        constraints = [
            models.CheckConstraint(
                condition=Q(rollout_percent__isnull=True)
                | Q(rollout_percent__gte=0, rollout_percent__lte=100),
                name="feature_flags_rollout_percent",
            ),
        ]

    def __str__(self) -> str:
        return self.key


class FeatureFlagUserOverride(models.Model):
    # The original had PRIMARY KEY (flag_key, user_id); Django admin cannot edit composite
    # keys, so a surrogate id plus the same uniqueness stands in for it.
    flag_key = models.CharField(max_length=128)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.CASCADE,
        db_column="user_id",
        db_constraint=False,
        related_name="feature_flag_overrides",
    )
    enabled = models.BooleanField()
    updated_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        db_column="updated_by",
        db_constraint=False,
        related_name="+",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "feature_flag_user_overrides"
        constraints = [
            models.UniqueConstraint(fields=["flag_key", "user"], name="feature_flag_override_key"),
        ]

    def __str__(self) -> str:
        return f"{self.flag_key} for user {self.user_id}"


class FeatureFlagExposureRollup(models.Model):
    flag_key = models.CharField(max_length=128)
    user_id = stable_user_id(db_index=True)
    day = models.DateField(db_index=True)  # retention prunes by day across users
    enabled = models.BooleanField()
    source = models.CharField(max_length=64)
    exposure_count = models.IntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "feature_flag_exposure_rollups"
        constraints = [
            models.UniqueConstraint(
                fields=["flag_key", "user_id", "day", "enabled", "source"],
                name="feature_flag_exposure_key",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.flag_key} {self.day}"
