"""MCP server instructions, the user's remote MCP servers, and agent memories."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.fields import (
    created_at,
    json_list,
    stable_user_id,
    text_id,
    updated_at,
)


class McpUserServerInstructions(models.Model):
    user_id = stable_user_id(primary_key=True)
    instructions = models.TextField(blank=True, default="")
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "mcp_user_server_instructions"
        verbose_name_plural = "MCP user server instructions"

    def __str__(self) -> str:
        return self.user_id


class McpServerSetting(models.Model):
    id = text_id()
    user_id = stable_user_id()
    name = models.CharField(max_length=255)
    url = models.TextField()
    enabled = models.BooleanField(default=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "mcp_server_settings"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "name"],
                name="mcp_server_settings_user_name_uq",
            ),
        ]
        indexes = [
            models.Index(fields=["user_id", "enabled"], name="mcp_server_settings_user_en_ix"),
        ]

    def __str__(self) -> str:
        return self.name


class MemoryStatus(models.TextChoices):
    ACTIVE = "active"
    DELETED = "deleted"
    ARCHIVED = "archived"


class McpMemory(models.Model):
    id = text_id()
    user_id = stable_user_id()
    category = models.CharField(max_length=64, null=True, blank=True)
    status = models.CharField(
        max_length=16,
        choices=MemoryStatus.choices,
        default=MemoryStatus.ACTIVE,
    )
    subject = models.TextField()
    summary = models.TextField(blank=True, default="")
    details = models.TextField(blank=True, default="")
    tags_json = json_list()
    dedupe_key = models.CharField(max_length=255, null=True, blank=True)
    source_uris_json = json_list()
    last_accessed_at = models.DateTimeField(null=True, blank=True)
    deleted_at = models.DateTimeField(null=True, blank=True)
    created_at = created_at()
    updated_at = updated_at()

    class Meta:
        db_table = "mcp_memories"
        verbose_name_plural = "MCP memories"
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=MemoryStatus.values), name="mcp_memories_status_valid"
            ),
        ]
        indexes = [
            models.Index(
                fields=["user_id", "status", "updated_at"],
                name="mcp_memories_user_status_ix",
            ),
            models.Index(fields=["user_id", "category", "status"], name="mcp_memories_user_cat_ix"),
            models.Index(fields=["user_id", "dedupe_key"], name="mcp_memories_user_dedupe_ix"),
        ]

    def __str__(self) -> str:
        return self.subject[:80]


class McpMemoryConversationSuppression(models.Model):
    """Original PK(user_id, conversation_id, memory_id); surrogate id + UNIQUE here (admin)."""

    user_id = stable_user_id()
    conversation_id = models.CharField(max_length=255)
    # ON DELETE CASCADE lives in the database (migration 0002), so raw deletes cascade too.
    memory = models.ForeignKey(
        McpMemory, on_delete=models.CASCADE, db_column="memory_id", db_constraint=False
    )
    last_seen_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    created_at = created_at()

    class Meta:
        db_table = "mcp_memory_conversation_suppressions"
        constraints = [
            models.UniqueConstraint(
                fields=["user_id", "conversation_id", "memory"],
                name="mcp_memory_suppressions_pk_uq",
            ),
        ]
        indexes = [
            # The retention prune scans expired rows across users by these time columns.
            models.Index(fields=["expires_at"], name="mcp_memory_supp_expires_ix"),
            models.Index(fields=["last_seen_at"], name="mcp_memory_supp_seen_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.conversation_id}:{self.memory_id}"
