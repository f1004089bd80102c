"""Per-user tables of the two actors that talk to the person's own remote services.

``McpClientHub`` keeps, per remote MCP server (``mcp_server_settings`` row in ``public``), what
the last connection found: its status, the server's name and version, and the tool list cached
by ``mcpServerRefresh``. ``RemoteConnectorSession`` keeps, per registered remote connector
(``remote_connector_settings``), the live session's state: when it said hello, when it was last
seen, and the tools it offered. No user_id column: the schema is the user; each actor's owner
row repeats the owner so every call checks it.
"""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from kody.userschema import ActorModel

# The per-user schema version that brought these tables.
REMOTE_SCHEMA = 8

HUB_STATUSES = ("connected", "error", "auth_required")


class McpClientHubOwner(ActorModel):
    id = models.SmallIntegerField(primary_key=True, default=1)
    owner_id = models.CharField(max_length=64)

    actor_version = REMOTE_SCHEMA

    class Meta:
        db_table = "mcp_client_hub_owner"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="mcp_client_hub_owner_one")]


class McpHubServer(ActorModel):
    """What Kody last learned from one of the person's remote MCP servers."""

    server_id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    status = models.CharField(max_length=16)
    last_error = models.TextField(default="")
    server_name = models.CharField(max_length=255, default="")
    server_version = models.CharField(max_length=255, default="")
    protocol_version = models.CharField(max_length=64, default="")
    tools = models.JSONField(default=list)
    connected_at = models.DateTimeField(null=True)
    refreshed_at = models.DateTimeField(null=True)
    # OAuth, sealed (AES-GCM, bound to owner and server): the client registration and tokens,
    # and an authorization in progress (its PKCE verifier), found by its state's SHA-256.
    oauth_sealed = models.TextField(default="")
    pending_state_hash = models.CharField(max_length=64, default="")
    pending_sealed = models.TextField(default="")
    pending_expires_at = models.DateTimeField(null=True)
    updated_at = models.DateTimeField()

    actor_version = REMOTE_SCHEMA

    class Meta:
        db_table = "mcp_hub_servers"
        constraints = [
            models.CheckConstraint(condition=Q(status__in=HUB_STATUSES), name="mcp_hub_status")
        ]


class RemoteConnectorOwner(ActorModel):
    id = models.SmallIntegerField(primary_key=True, default=1)
    owner_id = models.CharField(max_length=64)

    actor_version = REMOTE_SCHEMA

    class Meta:
        db_table = "remote_connector_owner"
        constraints = [models.CheckConstraint(condition=Q(id=1), name="remote_connector_owner_one")]


class RemoteConnectorState(ActorModel):
    """One registered connector's session: the socket's last hello, heartbeat and tools."""

    instance_id = models.CharField(max_length=64, primary_key=True, db_collation="C")
    connected = models.BooleanField(default=False)
    session_token = models.CharField(max_length=64, default="")
    connected_at = models.DateTimeField(null=True)
    last_seen_at = models.DateTimeField(null=True)
    disconnected_at = models.DateTimeField(null=True)
    tools = models.JSONField(default=list)
    updated_at = models.DateTimeField()

    actor_version = REMOTE_SCHEMA

    class Meta:
        db_table = "remote_connector_sessions"
