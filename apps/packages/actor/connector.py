"""RemoteConnectorSession: one person's remote connectors and their live sessions.

Design note. A remote connector is a program the person runs somewhere Kody cannot reach (a
machine at home) that opens an outbound WebSocket to Kody and offers MCP-style tools over it.
The registration (instance id, enabled, attached, the sealed shared secret) is the public
``remote_connector_settings`` row; the session (connected or not, when it said hello and was
last seen, the tools it offered) is this actor's state. Both change in one transaction here.
A session is named by a token minted at hello: a heartbeat or goodbye from an older socket
(a connector that reconnected) does not touch the newer session.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from apps.packages.actor import remote_models as m
from apps.packages.actor.rows import export_row
from apps.packages.models import RemoteConnectorSetting
from kody.actors import Actor, OwnerMismatch, deletion_safe, reads
from kody.errors import Conflict, NotFound

MAX_CONNECTORS = 20
# A session not heard from for this long is reported as not connected.
STALE_AFTER = timedelta(seconds=90)


class ConnectorNotFound(NotFound):
    code = "remote_connector_not_found"
    message = "No remote connector with that name."


class ConnectorTaken(Conflict):
    code = "remote_connector_taken"
    message = "You already have a remote connector with that name."


class TooManyConnectors(Conflict):
    code = "limit_reached"
    status = 403
    message = f"Limit reached: at most {MAX_CONNECTORS} remote connectors."


class RemoteConnectorSession(Actor):
    name = "packages.RemoteConnectorSession"
    tables = (m.RemoteConnectorOwner, m.RemoteConnectorState)

    def _check_owner(self) -> None:
        owner = (
            m.RemoteConnectorOwner.objects.filter(id=1).values_list("owner_id", flat=True).first()
        )
        if owner is None and not self.context.read_only:
            m.RemoteConnectorOwner.objects.create(id=1, owner_id=self.user_id)
        elif owner is not None and owner != self.user_id:
            raise OwnerMismatch("these remote connectors belong to another owner")

    def _setting(self, instance_id: str) -> RemoteConnectorSetting:
        found = RemoteConnectorSetting.objects.filter(
            user_id=self.user_id, instance_id=instance_id
        ).first()
        if found is None:
            raise ConnectorNotFound(details={"instanceId": instance_id})
        return found

    def register(
        self, setting_id: str, instance_id: str, sealed_secret: str, attached: bool
    ) -> dict[str, Any]:
        self._check_owner()
        mine = RemoteConnectorSetting.objects.filter(user_id=self.user_id)
        if mine.filter(instance_id=instance_id).exists():
            raise ConnectorTaken(details={"instanceId": instance_id})
        if mine.count() >= MAX_CONNECTORS:
            raise TooManyConnectors(details={"limit": MAX_CONNECTORS})
        RemoteConnectorSetting.objects.create(
            id=setting_id,
            user_id=self.user_id,
            instance_id=instance_id,
            attached=attached,
            encrypted_shared_secret=sealed_secret,
        )
        m.RemoteConnectorState.objects.update_or_create(
            instance_id=instance_id,
            defaults={
                "connected": False,
                "session_token": "",
                "tools": [],
                "updated_at": timezone.now(),
            },
        )
        return {"instanceId": instance_id}

    def update(
        self,
        instance_id: str,
        enabled: bool | None = None,
        attached: bool | None = None,
        sealed_secret: str | None = None,
    ) -> dict[str, Any]:
        """Change a registration; disabling or a new secret ends the live session."""
        self._check_owner()
        setting = self._setting(instance_id)
        if enabled is not None:
            setting.enabled = bool(enabled)
        if attached is not None:
            setting.attached = bool(attached)
        if sealed_secret is not None:
            setting.encrypted_shared_secret = sealed_secret
        setting.save()
        if enabled is False or sealed_secret is not None:
            self._end(instance_id, None, timezone.now())
        return {"instanceId": instance_id}

    def remove(self, instance_id: str) -> dict[str, Any]:
        self._check_owner()
        self._setting(instance_id).delete()
        m.RemoteConnectorState.objects.filter(instance_id=instance_id).delete()
        return {"instanceId": instance_id, "removed": True}

    def hello(
        self, instance_id: str, session_token: str, tools: list[dict[str, Any]], at: str
    ) -> dict[str, Any]:
        """A connector authenticated (the caller checked its shared secret) and listed tools."""
        self._check_owner()
        if not self._setting(instance_id).enabled:
            raise ConnectorNotFound(details={"instanceId": instance_id})
        when = datetime.fromisoformat(at)
        m.RemoteConnectorState.objects.update_or_create(
            instance_id=instance_id,
            defaults={
                "connected": True,
                "session_token": session_token,
                "connected_at": when,
                "last_seen_at": when,
                "tools": tools,
                "updated_at": when,
            },
        )
        return {"instanceId": instance_id}

    def heartbeat(self, instance_id: str, session_token: str, at: str) -> dict[str, Any]:
        """Whether the session is still the current, enabled one (else the socket closes)."""
        self._check_owner()
        setting = RemoteConnectorSetting.objects.filter(
            user_id=self.user_id, instance_id=instance_id
        ).first()
        when = datetime.fromisoformat(at)
        live = m.RemoteConnectorState.objects.filter(
            instance_id=instance_id, session_token=session_token, connected=True
        )
        current = (
            bool(setting and setting.enabled)
            and live.update(last_seen_at=when, updated_at=when) == 1
        )
        return {"current": current}

    def goodbye(self, instance_id: str, session_token: str, at: str) -> dict[str, Any]:
        self._check_owner()
        self._end(instance_id, session_token, datetime.fromisoformat(at))
        return {"instanceId": instance_id}

    def _end(self, instance_id: str, session_token: str | None, at: datetime) -> None:
        rows = m.RemoteConnectorState.objects.filter(instance_id=instance_id, connected=True)
        if session_token is not None:
            rows = rows.filter(session_token=session_token)
        rows.update(connected=False, session_token="", disconnected_at=at, updated_at=at)

    @reads
    def sessions(self) -> dict[str, dict[str, Any]]:
        self._check_owner()
        now = timezone.now()
        return {
            row.instance_id: session_json(row, now) for row in m.RemoteConnectorState.objects.all()
        }

    @reads
    def live_session(self, instance_id: str) -> str | None:
        """The token of the connector's current session, if it is connected and fresh."""
        self._check_owner()
        row = m.RemoteConnectorState.objects.filter(instance_id=instance_id).first()
        if row is None or not session_json(row, timezone.now())["connected"]:
            return None
        return row.session_token or None

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        deleted = {}
        for model in (m.RemoteConnectorState, m.RemoteConnectorOwner):
            deleted[model._meta.db_table] = model.objects.all().delete()[0]
        return {"deleted": deleted}

    @deletion_safe
    def export_pages(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """Session rows without their session tokens."""
        limit = max(1, min(int(limit), 500))
        rows = m.RemoteConnectorState.objects.order_by("instance_id")
        if cursor:
            rows = rows.filter(instance_id__gt=cursor)
        page = list(rows[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        out = []
        for row in page:
            exported = export_row(row)
            exported.pop("session_token", None)
            out.append(exported)
        return {
            "remote_connector_sessions": out,
            "next_cursor": page[-1].instance_id if more else None,
        }


def session_json(row: m.RemoteConnectorState, now: datetime) -> dict[str, Any]:
    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    fresh = row.last_seen_at is not None and now - row.last_seen_at <= STALE_AFTER
    return {
        "connected": bool(row.connected and fresh),
        "connectedAt": iso(row.connected_at),
        "lastSeenAt": iso(row.last_seen_at),
        "disconnectedAt": iso(row.disconnected_at),
        "tools": row.tools,
    }
