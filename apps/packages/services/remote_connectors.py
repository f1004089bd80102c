"""The person's remote connectors: register, attach/detach, enable/disable, rotate the shared
secret, remove, the status the agents read (``metaListRemoteConnectorStatus``) and calls to a
connector's tools (``remoteConnectorCallTool``).

The shared secret is chosen by the person (they configure their connector with it), sealed with
AES-GCM bound to the owner and the connector's name, and never shown again: not on a page, not
in a reply, not in an export. A connector proves it at hello; the comparison is constant-time.
"""

from __future__ import annotations

import hmac
import json
import re
import uuid
from typing import Any

from django_redis import get_redis_connection

from apps.accounts.models import User
from apps.packages.actor.connector import ConnectorNotFound, RemoteConnectorSession
from apps.packages.models import RemoteConnectorSetting
from apps.packages.services import crypto
from kody.errors import Conflict, InvalidInput, KodyError

INSTANCE_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$")
SECRET_MIN, SECRET_MAX = 24, 256
CALL_SECONDS = 30
MAX_REPLY_BYTES = 1024 * 1024


class InstanceInvalid(InvalidInput):
    code = "remote_connector_name_invalid"
    message = "A connector name is 1-64 lowercase letters, digits or '-', not at either end."


class SecretInvalid(InvalidInput):
    code = "remote_connector_secret_invalid"
    message = f"The shared secret must be {SECRET_MIN} to {SECRET_MAX} characters."


def check_instance(instance_id: str) -> str:
    instance_id = instance_id.strip().lower()
    if not INSTANCE_RE.match(instance_id):
        raise InstanceInvalid(details={"instanceId": instance_id[:80]})
    return instance_id


def _sealed(user_id: str, instance_id: str, secret: str) -> str:
    if not SECRET_MIN <= len(secret) <= SECRET_MAX:
        raise SecretInvalid()
    key_id, token = crypto.seal(secret, _aad(user_id, instance_id))
    return f"{key_id}:{token}"


def _aad(user_id: str, instance_id: str) -> str:
    return f"remote-connector:{user_id}:{instance_id}"


def register(user_id: str, instance_id: str, secret: str, attached: bool = True) -> dict[str, Any]:
    instance_id = check_instance(instance_id)
    sealed = _sealed(user_id, instance_id, secret)
    RemoteConnectorSession.call(
        user_id,
        "register",
        setting_id=uuid.uuid4().hex,
        instance_id=instance_id,
        sealed_secret=sealed,
        attached=attached,
    )
    return get(user_id, instance_id)


def _setting(user_id: str, instance_id: str) -> RemoteConnectorSetting:
    found = RemoteConnectorSetting.objects.filter(user_id=user_id, instance_id=instance_id).first()
    if found is None:
        raise ConnectorNotFound(details={"instanceId": instance_id[:80]})
    return found


def update(
    user_id: str,
    instance_id: str,
    *,
    enabled: bool | None = None,
    attached: bool | None = None,
    secret: str | None = None,
) -> dict[str, Any]:
    _setting(user_id, instance_id)
    sealed = _sealed(user_id, instance_id, secret) if secret is not None else None
    RemoteConnectorSession.call(
        user_id,
        "update",
        instance_id=instance_id,
        enabled=enabled,
        attached=attached,
        sealed_secret=sealed,
    )
    return get(user_id, instance_id)


def remove(user_id: str, instance_id: str) -> dict[str, Any]:
    _setting(user_id, instance_id)
    removed: dict[str, Any] = RemoteConnectorSession.call(
        user_id, "remove", instance_id=instance_id
    )
    return removed


def connector_json(row: RemoteConnectorSetting, session: dict[str, Any] | None) -> dict[str, Any]:
    session = session or {}
    tools = session.get("tools") or []
    return {
        "id": row.id,
        "instanceId": row.instance_id,
        "enabled": row.enabled,
        "attached": row.attached,
        "connected": bool(session.get("connected")),
        "connectedAt": session.get("connectedAt"),
        "lastSeenAt": session.get("lastSeenAt"),
        "disconnectedAt": session.get("disconnectedAt"),
        "toolCount": len(tools),
        "tools": [{k: t[k] for k in ("name", "title", "description") if k in t} for t in tools],
    }


def listing(user_id: str) -> list[dict[str, Any]]:
    rows = list(RemoteConnectorSetting.objects.filter(user_id=user_id).order_by("instance_id"))
    sessions = RemoteConnectorSession.call(user_id, "sessions") if rows else {}
    return [connector_json(row, sessions.get(row.instance_id)) for row in rows]


def get(user_id: str, instance_id: str) -> dict[str, Any]:
    row = _setting(user_id, instance_id)
    sessions = RemoteConnectorSession.call(user_id, "sessions")
    return connector_json(row, sessions.get(row.instance_id))


def authenticate(username: str, instance_id: str, secret: str) -> str | None:
    """The owner's stable id when ``secret`` opens an enabled connector of that name."""
    user = User.objects.filter(username=username.lower(), deleting_at__isnull=True).first()
    if user is None or not INSTANCE_RE.match(instance_id):
        return None
    uid = user.stable_user_id
    row = RemoteConnectorSetting.objects.filter(user_id=uid, instance_id=instance_id).first()
    if row is None or not row.enabled or not row.encrypted_shared_secret:
        return None
    key_id, _, token = row.encrypted_shared_secret.partition(":")
    try:
        expected = crypto.open_sealed(key_id, token, _aad(uid, instance_id))
    except (crypto.Undecryptable, ValueError):
        return None
    return uid if hmac.compare_digest(expected.encode(), secret.encode()) else None


class ConnectorDetached(Conflict):
    code = "remote_connector_detached"
    message = "This connector is detached from your agents' sessions; attach it to call it."


class ConnectorNotConnected(Conflict):
    code = "remote_connector_not_connected"
    message = "This connector is not connected to Kody right now."


class ConnectorTimeout(KodyError):
    code = "remote_connector_timeout"
    status = 504
    message = "The connector did not answer in time."


class ConnectorFailed(KodyError):
    code = "remote_connector_error"
    status = 502
    message = "The connector answered the call with an error."


def requests_key(user_id: str, instance_id: str, session_token: str) -> str:
    return f"remote-connector:v1:requests:{user_id}:{instance_id}:{session_token}"


def reply_key(request_id: str) -> str:
    return f"remote-connector:v1:reply:{request_id}"


def call_tool(
    user_id: str, instance_id: str, tool: str, arguments: dict[str, Any] | None
) -> dict[str, Any]:
    """Call a tool of an enabled, attached, connected connector, through the process that holds
    its socket: the request goes on the session's Redis list, the answer comes back on a list of
    its own (the socket's process may be any web process)."""
    row = _setting(user_id, instance_id)
    if not row.enabled:
        raise ConnectorNotConnected(details={"instanceId": instance_id})
    if not row.attached:
        raise ConnectorDetached(details={"instanceId": instance_id})
    token = RemoteConnectorSession.call(user_id, "live_session", instance_id=instance_id)
    if not token:
        raise ConnectorNotConnected(details={"instanceId": instance_id})
    request_id = uuid.uuid4().hex
    redis = get_redis_connection("default")
    key = requests_key(user_id, instance_id, token)
    request = {"id": request_id, "tool": tool, "arguments": arguments or {}}
    redis.rpush(key, json.dumps(request))
    redis.expire(key, CALL_SECONDS)
    got = redis.blpop([reply_key(request_id)], timeout=CALL_SECONDS)
    if got is None:
        raise ConnectorTimeout(details={"instanceId": instance_id})
    if len(got[1]) > MAX_REPLY_BYTES:
        raise ConnectorFailed("The connector's answer is over 1 MiB.")
    reply = json.loads(got[1])
    result = reply.get("result") if isinstance(reply, dict) else None
    if not isinstance(result, dict):
        raise ConnectorFailed(details={"instanceId": instance_id})
    return {
        "content": result.get("content") if isinstance(result.get("content"), list) else [],
        "structuredContent": result.get("structuredContent"),
        "isError": bool(result.get("isError", False)),
    }
