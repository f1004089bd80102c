"""Package invocation tokens and the HTTP invocation of an export.

A token is shown once at creation and kept as its SHA-256 only. It names one package (and
optionally which exports, ``export_names_json``; empty means all). ``POST
/api/v1/packages/<packageId>/exports/<exportName>`` with the token runs the export as the
package's owner; an ``Idempotency-Key`` claims the owner's RunLog invocation ledger first, so
the same key with the same request answers the recorded response and runs nothing again.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.entitlements import services as entitlements
from apps.packages.models import PackageInvocationToken, SavedPackage
from apps.packages.services import exports, run_history
from apps.packages.services.packages import invocation_token, owned, token_json
from kody.capabilities import Context
from kody.errors import Conflict, Forbidden, InvalidInput, KodyError, Unauthenticated

TOKEN_PREFIX = "kpi_"
MAX_BODY = 1_000_000


class TokenNotAllowed(Forbidden):
    code = "invocation_token_not_allowed"
    message = "This invocation token does not allow that export."


class InvocationTokenLimit(KodyError):
    code = "invocation_token_limit"
    status = 429
    message = "You hold as many live invocation tokens as your plan allows; revoke one first."


class InvocationInProgress(Conflict):
    code = "invocation_in_progress"
    message = "An invocation with this Idempotency-Key is still running."


def _hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


def create(
    user_id: str, package_id: str, name: str, export_names: list[str] | None = None
) -> dict[str, Any]:
    package = owned(user_id, package_id)
    raw = TOKEN_PREFIX + secrets.token_urlsafe(32)
    with transaction.atomic():
        # One writer per person at a time, so parallel creates cannot each count one short.
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                [f"kody:invocation-tokens:{user_id}"],
            )
        limit = token_limit(user_id)
        live = PackageInvocationToken.objects.filter(
            user_id=user_id, revoked_at__isnull=True
        ).count()
        if live >= limit:
            raise InvocationTokenLimit(details={"limit": limit, "used": live})
        row = PackageInvocationToken.objects.create(
            user_id=user_id,
            package_id=package.id,
            name=name,
            token_hash=_hash(raw),
            package_ids_json=[package.id],
            package_kody_ids_json=[package.kody_id] if package.kody_id else [],
            export_names_json=sorted(set(export_names or [])),
        )
    return {"token": token_json(row), "secret": raw}


def token_limit(user_id: str) -> int:
    """How many live (unrevoked) invocation tokens the person's plan allows."""
    limits: dict[str, int] = settings.KODY_INVOCATION_TOKEN_LIMITS
    plan = str(entitlements.cached_plan(user_id))
    return int(limits.get(plan, limits["free"]))


def revoke(user_id: str, token_id: str) -> dict[str, Any]:
    invocation_token(user_id, token_id)  # 404 for anyone else's
    PackageInvocationToken.objects.filter(
        user_id=user_id, id=token_id, revoked_at__isnull=True
    ).update(revoked_at=timezone.now())
    return invocation_token(user_id, token_id)


def authenticate(raw: str, package_id: str, export_name: str) -> PackageInvocationToken:
    row = PackageInvocationToken.objects.filter(token_hash=_hash(raw)).first()
    # The lookup is by hash; compare again in constant time so timing says nothing either.
    if row is None or not hmac.compare_digest(row.token_hash, _hash(raw)):
        raise Unauthenticated("A valid invocation token is required.")
    if row.revoked_at is not None:
        raise Unauthenticated("This invocation token was revoked.", code="invocation_token_revoked")
    if row.package_id != package_id:
        raise TokenNotAllowed(details={"packageId": package_id})
    if row.export_names_json and export_name not in row.export_names_json:
        raise TokenNotAllowed(details={"export": export_name})
    return row


def invoke(
    raw: str, package_id: str, export_name: str, body: bytes, idempotency_key: str | None
) -> tuple[int, dict[str, Any], bool]:
    """Run the export for an HTTP caller: (status, reply, replayed)."""
    token = authenticate(raw, package_id, export_name)
    if len(body) > MAX_BODY:
        raise InvalidInput("The request body is too large.", details={"maxBytes": MAX_BODY})
    try:
        args = json.loads(body or b"{}")
    except ValueError:
        raise InvalidInput("The request body must be JSON.") from None
    package = SavedPackage.objects.filter(id=package_id, user_id=token.user_id).first()
    owner = User.objects.filter(stable_user_id=token.user_id).first()
    if package is None or owner is None:
        raise TokenNotAllowed(details={"packageId": package_id})
    PackageInvocationToken.objects.filter(id=token.id).update(last_used_at=timezone.now())
    ctx = Context(user=owner, surface="api")
    if not idempotency_key:
        return 200, exports.run_export(ctx, package, export_name, args), False
    key = {
        "token_id": token.id,
        "package_id": package.id,
        "export_name": export_name,
        "idempotency_key": idempotency_key[:255],
    }
    request_hash = hashlib.sha256(body or b"{}").hexdigest()
    claim = run_history.runs().begin_invocation(
        token.user_id, key, request_hash, package_kody_id=package.kody_id, source="http"
    )
    if claim["outcome"] == "replay":
        stored = claim["response"] or {}
        return int(stored.get("status", 200)), stored.get("body") or {}, True
    if claim["outcome"] == "in_progress":
        raise InvocationInProgress(details={"invocationId": claim["id"]})
    try:
        reply = exports.run_export(
            ctx, package, export_name, args, metadata={"invocationId": claim["id"]}
        )
    except KodyError as exc:
        error = {"error": exc.as_dict()}
        run_history.runs().finish_invocation(
            token.user_id, claim["id"], "error", {"status": exc.status, "body": error}
        )
        raise
    run_history.runs().finish_invocation(
        token.user_id, claim["id"], "success", {"status": 200, "body": reply}
    )
    return 200, reply, False
