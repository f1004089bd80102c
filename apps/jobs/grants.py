"""May this job still run? A job runs as the grant that scheduled it, and only while that
grant and its owner still may act.

``refusal(context, owner)`` answers ``None`` (run it) or the reason it must not run:

* ``owner_missing`` / ``owner_deleting`` / ``owner_suspended`` / ``owner_inactive``: the
  account policy's ``may_act`` says no (the same answer a token of the owner gets);
* ``token_revoked`` / ``token_expired`` / ``token_missing``: the access token the job was
  scheduled with (``tokenId`` in its caller context) is no longer live — a person who revokes a
  token expects everything it set in motion to stop. Jobs written before ``tokenId`` existed
  name their PAT as ``pat:{id}``; an OAuth client's job without it must have some live token
  of that client.

A job scheduled from a signed-in session (no token) depends on the owner alone. The runner
asks before every run; a refused run is recorded as skipped with the reason and the job is
disabled (``Job.disabled_reason``) until its owner re-enables it with a live grant.
"""

from __future__ import annotations

from typing import Any

from django.utils import timezone

from apps.accounts import policy
from apps.accounts.models import AccessToken

TOKENLESS_SURFACES = frozenset({"api", "mcp", "ui", "cli", "job", "admin"})
REASONS = {
    "owner_missing": "The job's owner no longer exists.",
    "owner_deleting": "The owner's account is being deleted.",
    "owner_suspended": "The owner's account is suspended.",
    "owner_inactive": "The owner's account is deactivated.",
    "token_revoked": "The access token that scheduled this job was revoked.",
    "token_expired": "The access token that scheduled this job has expired.",
    "token_missing": "The access token that scheduled this job no longer exists.",
}


def refusal(context: dict[str, Any], owner: Any) -> str | None:
    if owner is None:
        return "owner_missing"
    if not policy.may_act(owner):
        if owner.deleting_at is not None:
            return "owner_deleting"
        if owner.suspended_at is not None:
            return "owner_suspended"
        return "owner_inactive"
    return _token_refusal(context or {}, owner)


def _token_refusal(context: dict[str, Any], owner: Any) -> str | None:
    token_id = context.get("tokenId")
    principal = str(context.get("principal") or "")
    if not isinstance(token_id, int) and principal.startswith("pat:"):
        token_id = int(principal[4:]) if principal[4:].isdigit() else None
    if isinstance(token_id, int):
        token = AccessToken.objects.filter(pk=token_id, user_id=owner.pk).first()
        return _dead(token)
    # Scheduled without a token (a session, an operator's shell, a job of such a job): the
    # principal is "{surface}:{userId}" — the owner alone stands behind it.
    surface, _, user_id = principal.partition(":")
    tokenless = surface in TOKENLESS_SURFACES and user_id == owner.stable_user_id
    if not tokenless and principal:
        # An OAuth client's job from before tokenId: some token of that client must be live.
        live = AccessToken.objects.filter(
            user_id=owner.pk, client_id=principal, revoked_at__isnull=True
        )
        now = timezone.now()
        if not any(t.expires_at is None or t.expires_at > now for t in live):
            return "token_revoked"
    return None


def _dead(token: AccessToken | None) -> str | None:
    if token is None:
        return "token_missing"
    if token.revoked_at is not None:
        return "token_revoked"
    if token.expires_at is not None and token.expires_at <= timezone.now():
        return "token_expired"
    return None


def describe(reason: str | None) -> str:
    return REASONS.get(reason or "", reason or "")
