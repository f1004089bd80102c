"""McpClientHub: one person's remote MCP servers, as Kody last found them.

Design note. The server list itself is the public ``mcp_server_settings`` table (name, URL,
enabled), so operators and the deletion inventory see it; what a connection learned (status,
the server's identity, the cached tool list) is this actor's state in the owner's schema. The
hub writes both in the same transaction, so a server is never listed without its state or left
behind by a removal. Network work never happens here: the service talks to the remote server
first (outside any transaction) and hands the hub a finished ``probe`` to record.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, TypedDict

from django.utils import timezone

from apps.packages.actor import remote_models as m
from apps.packages.models import McpServerSetting
from kody.actors import Actor, OwnerMismatch, deletion_safe, reads
from kody.errors import Conflict, NotFound

MAX_SERVERS = 50


class Probe(TypedDict, total=False):
    status: str  # one of remote_models.HUB_STATUSES
    error: str
    serverName: str
    serverVersion: str
    protocolVersion: str
    tools: list[dict[str, Any]] | None  # None: keep the cached list
    at: str


class ServerNotFound(NotFound):
    code = "mcp_server_not_found"
    message = "No MCP server with that id."


class ServerNameTaken(Conflict):
    code = "mcp_server_name_taken"
    message = "You already have an MCP server with that name."


class TooManyServers(Conflict):
    code = "limit_reached"
    status = 403
    message = f"Limit reached: at most {MAX_SERVERS} MCP servers."


class McpClientHub(Actor):
    name = "packages.McpClientHub"
    tables = (m.McpClientHubOwner, m.McpHubServer)

    def _check_owner(self) -> None:
        owner = m.McpClientHubOwner.objects.filter(id=1).values_list("owner_id", flat=True).first()
        if owner is None and not self.context.read_only:
            m.McpClientHubOwner.objects.create(id=1, owner_id=self.user_id)
        elif owner is not None and owner != self.user_id:
            raise OwnerMismatch("this MCP client hub belongs to another owner")

    def _setting(self, server_id: str) -> McpServerSetting:
        found = McpServerSetting.objects.filter(user_id=self.user_id, id=server_id).first()
        if found is None:
            raise ServerNotFound(details={"serverId": server_id})
        return found

    def add_server(self, server_id: str, name: str, url: str, probe: Probe) -> dict[str, Any]:
        self._check_owner()
        mine = McpServerSetting.objects.filter(user_id=self.user_id)
        if mine.filter(name=name).exists():
            raise ServerNameTaken(details={"name": name})
        if mine.count() >= MAX_SERVERS:
            raise TooManyServers(details={"limit": MAX_SERVERS})
        McpServerSetting.objects.create(id=server_id, user_id=self.user_id, name=name, url=url)
        self._record(server_id, probe)
        return {"serverId": server_id}

    def record_probe(self, server_id: str, probe: Probe) -> dict[str, Any]:
        self._check_owner()
        self._setting(server_id)
        self._record(server_id, probe)
        return {"serverId": server_id}

    def _record(self, server_id: str, probe: Probe) -> None:
        at = datetime.fromisoformat(probe["at"]) if probe.get("at") else timezone.now()
        row = m.McpHubServer.objects.filter(server_id=server_id).first()
        if row is None:
            row = m.McpHubServer(server_id=server_id)
        row.status = probe["status"]
        row.last_error = probe.get("error", "")[:2000]
        if probe["status"] == "connected":
            row.connected_at = at
            row.server_name = probe.get("serverName", "")[:255]
            row.server_version = probe.get("serverVersion", "")[:255]
            row.protocol_version = probe.get("protocolVersion", "")[:64]
        tools = probe.get("tools")
        if tools is not None:
            row.tools = tools
            row.refreshed_at = at
        row.updated_at = at
        row.save()

    def set_enabled(self, server_id: str, enabled: bool) -> dict[str, Any]:
        self._check_owner()
        setting = self._setting(server_id)
        setting.enabled = bool(enabled)
        setting.save(update_fields=["enabled", "updated_at"])
        return {"serverId": server_id, "enabled": setting.enabled}

    def remove_server(self, server_id: str) -> dict[str, Any]:
        self._check_owner()
        self._setting(server_id).delete()
        m.McpHubServer.objects.filter(server_id=server_id).delete()
        return {"serverId": server_id, "removed": True}

    def save_oauth(self, server_id: str, sealed: str) -> dict[str, Any]:
        """Store the sealed OAuth registration and tokens (a run may have rotated them)."""
        self._check_owner()
        self._setting(server_id)
        m.McpHubServer.objects.filter(server_id=server_id).update(
            oauth_sealed=sealed, updated_at=timezone.now()
        )
        return {"serverId": server_id}

    def begin_authorization(
        self, server_id: str, state_hash: str, pending: str, oauth: str, expires_at: str
    ) -> dict[str, Any]:
        self._check_owner()
        self._setting(server_id)
        m.McpHubServer.objects.filter(server_id=server_id).update(
            oauth_sealed=oauth,
            pending_state_hash=state_hash,
            pending_sealed=pending,
            pending_expires_at=datetime.fromisoformat(expires_at),
            updated_at=timezone.now(),
        )
        return {"serverId": server_id}

    def finish_authorization(self, server_id: str, oauth: str, probe: Probe) -> dict[str, Any]:
        self._check_owner()
        self._setting(server_id)
        m.McpHubServer.objects.filter(server_id=server_id).update(
            oauth_sealed=oauth, pending_state_hash="", pending_sealed="", pending_expires_at=None
        )
        self._record(server_id, probe)
        return {"serverId": server_id}

    @reads
    def oauth(self, server_id: str) -> dict[str, Any]:
        """The sealed OAuth material of one server (never leaves the services)."""
        self._check_owner()
        row = m.McpHubServer.objects.filter(server_id=server_id).first()
        return {"sealed": row.oauth_sealed if row else ""}

    @reads
    def pending(self, state_hash: str) -> dict[str, Any] | None:
        """The authorization in progress whose state hashes to ``state_hash``, if unexpired."""
        self._check_owner()
        row = m.McpHubServer.objects.filter(
            pending_state_hash=state_hash, pending_expires_at__gt=timezone.now()
        ).first()
        if row is None or not state_hash:
            return None
        return {"serverId": row.server_id, "sealed": row.pending_sealed, "oauth": row.oauth_sealed}

    @reads
    def states(self) -> dict[str, dict[str, Any]]:
        """Every server's recorded state, by server id."""
        self._check_owner()
        return {row.server_id: state_json(row) for row in m.McpHubServer.objects.all()}

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        deleted = {}
        for model in (m.McpHubServer, m.McpClientHubOwner):
            deleted[model._meta.db_table] = model.objects.all().delete()[0]
        return {"deleted": deleted}


def state_json(row: m.McpHubServer) -> dict[str, Any]:
    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "status": row.status,
        "lastError": row.last_error or None,
        "serverName": row.server_name or None,
        "serverVersion": row.server_version or None,
        "protocolVersion": row.protocol_version or None,
        "tools": row.tools,
        "connectedAt": iso(row.connected_at),
        "refreshedAt": iso(row.refreshed_at),
    }
