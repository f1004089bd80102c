"""Webhooks: ``package.json#kody.webhooks`` entries get minted ingress URLs that run an export.

``{"<name>": {"export": "default"}}`` in the published manifest declares one. Minting gives
``/@<username>/webhooks/<kodyId>/<name>/<secret>`` (``kodyId`` is the package's short name)
once; the secret is kept as its SHA-256 (for ingress) and sealed with AES-GCM (for
server-side apply), and no capability returns the URL again — rotating mints a new one and
the old stops working. A delivery is checked in constant time, bounded in size, charged, run
once through the package's export and recorded as a ``webhook`` run; an unknown, wrong,
rotated-away or disabled URL answers 404 and runs nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from django.utils import timezone

from apps.accounts.models import User
from apps.packages.models import EntitySource, SavedPackage, WebhookEndpoint
from apps.packages.services import crypto, exports, run_history
from apps.packages.services.packages import owned
from kody.capabilities import Context
from kody.errors import InvalidInput, KodyError, NotFound
from kody.kv import keys as kv_keys
from kody.kv import store as kv

MAX_BODY = 256 * 1024
FORWARDED_HEADERS = ("content-type", "user-agent", "x-github-event", "x-request-id")


class WebhookNotFound(NotFound):
    code = "webhook_not_found"
    message = "No such webhook."


class DeliveryTooLarge(KodyError):
    code = "webhook_body_too_large"
    status = 413
    message = "The delivery body is too large."


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _aad(user_id: str, package_id: str, name: str) -> str:
    return f"webhook_endpoints:v1:{user_id}:{package_id}:{name}"


def declared(package: SavedPackage) -> dict[str, Any]:
    """The webhooks of the package's published manifest."""
    source = EntitySource.objects.filter(id=package.source_id).first()
    if source is None or not source.published_commit:
        return {}
    key = kv_keys.source_manifest_snapshot(source.id, source.published_commit)
    manifest = kv.get_json(key) or {}
    hooks = manifest.get("webhooks") or {}
    return hooks if isinstance(hooks, dict) else {}


def _json(row: WebhookEndpoint) -> dict[str, Any]:
    return {
        "packageId": row.package_id,
        "name": row.webhook_name,
        "enabled": row.enabled,
        "minted": bool(row.url_secret_hash),
        "rotatedAt": row.rotated_at.isoformat() if row.rotated_at else None,
        "createdAt": row.created_at.isoformat(),
    }


def _url(user: User, package: SavedPackage, name: str, secret: str) -> str:
    short = (package.kody_id or package.name).rsplit("/", 1)[-1]
    return f"/@{user.username}/webhooks/{short}/{name}/{secret}"


def mint(user: User, package_id: str, name: str, *, rotate: bool = False) -> dict[str, Any]:
    uid = user.stable_user_id
    package = owned(uid, package_id)
    if name not in declared(package):
        raise WebhookNotFound(
            "The published package.json declares no webhook of that name.",
            details={"packageId": package_id, "name": name},
        )
    row = WebhookEndpoint.objects.filter(user_id=uid, package_id=package.id, webhook_name=name)
    existing = row.first()
    if existing is not None and existing.url_secret_hash and not rotate:
        raise InvalidInput(
            "This webhook already has a URL; rotate it to get a new one.",
            code="webhook_already_minted",
            details={"name": name},
        )
    if existing is None and rotate:
        raise WebhookNotFound(details={"packageId": package_id, "name": name})
    secret = secrets.token_urlsafe(32)
    key_id, sealed = crypto.seal(secret, _aad(uid, package.id, name))
    fields = {
        "url_secret_hash": _hash(secret),
        "url_secret_encrypted": f"{key_id}:{sealed}",
        "rotated_at": timezone.now() if rotate else None,
    }
    if existing is None:
        existing = WebhookEndpoint.objects.create(
            user_id=uid, package_id=package.id, webhook_name=name, **fields
        )
    else:
        row.update(**fields, updated_at=timezone.now())
        existing.refresh_from_db()
    return {"webhook": _json(existing), "url": _url(user, package, name, secret)}


def set_enabled(user_id: str, package_id: str, name: str, enabled: bool) -> dict[str, Any]:
    owned(user_id, package_id)
    rows = WebhookEndpoint.objects.filter(user_id=user_id, package_id=package_id, webhook_name=name)
    if not rows.update(enabled=enabled, updated_at=timezone.now()):
        raise WebhookNotFound(details={"packageId": package_id, "name": name})
    return {"webhook": _json(rows.get())}


def listing(user_id: str, package_id: str | None = None) -> list[dict[str, Any]]:
    rows = WebhookEndpoint.objects.filter(user_id=user_id).order_by("package_id", "webhook_name")
    if package_id:
        owned(user_id, package_id)
        rows = rows.filter(package_id=package_id)
    return [_json(r) for r in rows[:500]]


def deliveries(user_id: str, package_id: str | None = None, limit: int = 50) -> list[dict]:
    page = run_history.runs().list_runs(user_id, surface="webhook", limit=limit)["runs"]
    return [r for r in page if not package_id or r.get("packageId") == package_id]


def deliver(
    username: str, short_name: str, name: str, secret: str, body: bytes, headers: dict[str, str]
) -> dict[str, Any]:
    """Run one delivery; ``WebhookNotFound`` (404) for anything that does not match."""
    user = User.objects.filter(username__iexact=username).first()
    row = None
    package = None
    if user is not None:
        package = SavedPackage.objects.filter(
            user_id=user.stable_user_id, kody_id=f"@{user.username.lower()}/{short_name}"
        ).first()
    if package is not None:
        row = WebhookEndpoint.objects.filter(
            user_id=package.user_id, package_id=package.id, webhook_name=name
        ).first()
    # Compare even when nothing matched, so a miss and a wrong secret take the same time.
    stored = (row.url_secret_hash if row is not None else None) or _hash("-")
    matches = hmac.compare_digest(stored, _hash(secret))
    if row is None or package is None or user is None or not matches or not row.enabled:
        raise WebhookNotFound()
    spec = declared(package).get(name)
    if not isinstance(spec, dict):
        raise WebhookNotFound()
    if len(body) > MAX_BODY:
        raise DeliveryTooLarge(details={"maxBytes": MAX_BODY})
    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = None
    args = {
        "webhook": name,
        "body": text,
        "json": parsed,
        "headers": {h: headers[h] for h in FORWARDED_HEADERS if h in headers},
    }
    ctx = Context(user=user, surface="api")
    export = str(spec.get("export", "default"))
    return exports.run_export(
        ctx, package, export, args, surface="webhook", metadata={"webhook": name}
    )
