"""Operator bookkeeping keyed by stable user ids: lease repairs and MCP session index."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from kody.fields import stable_user_id, text_id


class AccountWriteLeaseRepair(models.Model):
    """Audit log of an admin force-releasing a stuck account write lease."""

    id = text_id()
    target_user_id = stable_user_id(db_index=True)
    lease_token = models.CharField(max_length=255)
    lease_holder = models.CharField(max_length=255)
    lease_acquired_at = models.DateTimeField()
    repaired_by_user_id = stable_user_id()
    reason = models.TextField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "account_write_lease_repairs"

    def __str__(self) -> str:
        return f"lease repair {self.id}"


class McpAgentSession(models.Model):
    """Deletion-only index: which MCP session objects belong to which user."""

    do_id = models.CharField(max_length=255, primary_key=True)
    user_id = stable_user_id(db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        db_table = "mcp_agent_sessions"

    def __str__(self) -> str:
        return self.do_id
