"""The security audit trail. Lives in the ``audit`` database (config/routers.py routes by table).

Rows carry only hashes of emails and IPs; they are global, kept 180 days, and are not part of
any user's deletion or export.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.utils import timezone


class AuditCategory(models.TextChoices):
    ACCOUNT = "account"
    ADMIN = "admin"
    AUTH = "auth"
    OAUTH = "oauth"


class AuditResult(models.TextChoices):
    SUCCESS = "success"
    FAILURE = "failure"
    RATE_LIMITED = "rate_limited"


class AuditEvent(models.Model):
    category = models.CharField(max_length=16, choices=AuditCategory.choices)
    action = models.CharField(max_length=128)
    result = models.CharField(max_length=16, choices=AuditResult.choices)
    email_hash = models.CharField(max_length=128, null=True, blank=True)
    ip_hash = models.CharField(max_length=128, null=True, blank=True)
    client_id = models.CharField(max_length=255, null=True, blank=True)
    path = models.CharField(max_length=2048, null=True, blank=True)
    reason = models.TextField(null=True, blank=True)
    timestamp = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "audit_events"
        indexes = [
            models.Index(fields=["-timestamp"], name="audit_events_timestamp_ix"),
            models.Index(fields=["action", "timestamp"], name="audit_events_action_ix"),
            models.Index(fields=["email_hash", "timestamp"], name="audit_events_email_hash_ix"),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(category__in=AuditCategory.values), name="audit_events_category"
            ),
            models.CheckConstraint(
                condition=Q(result__in=AuditResult.values), name="audit_events_result"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.category}/{self.action}/{self.result}"
