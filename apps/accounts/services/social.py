"""Social sign-in decisions: who a provider profile signs in, when it opens an account, and
linking and unlinking ``oauth_connections``.

* A connection for the provider account signs its owner in — unless the account is being
  deleted (the unverified purge's fence included) or is suspended.
* Without one: no verified provider email → refused; an account already using that email →
  "sign in to link" (nothing is linked: matching an email is not proof of owning the account);
  an address claimed as someone's former email → refused the way signup refuses it; otherwise
  a new account, verified at creation, with no password.
* Linking needs a signed-in person; a provider account linked elsewhere is refused.
* Unlinking is refused when it would leave no way to sign in (``sign_in_methods``).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts import policy, usernames
from apps.accounts.models import OAuthConnection, User
from apps.accounts.services import audit
from apps.accounts.services.identity_rules import (
    AccountSuspended,
    FormerEmailClaimed,
    _claim,
    _claimed_by_other,
    _lock_user,
    _mint_stable_user_id,
)
from apps.accounts.services.sign_in_methods import refuse_if_last
from apps.accounts.social.providers import Profile
from kody.errors import AccountDeleting, Conflict, KodyError, NotFound


class ProviderEmailUnverified(KodyError):
    code = "provider_email_unverified"
    status = 403


class SignInToLink(Conflict):
    code = "sign_in_to_link"


class ConnectionTaken(Conflict):
    code = "connection_taken"


class ConnectionNotFound(NotFound):
    code = "connection_not_found"
    message = "No such sign-in connection on your account."


@dataclass(frozen=True)
class SignedIn:
    user: User
    created: bool


def _label(provider: str) -> str:
    from apps.accounts.social import providers

    found = providers.configured().get(provider)
    return found.label if found else provider


def _audit(
    action: str,
    result: str,
    email: str | None,
    ip: str | None,
    reason: str,
    category: str = "auth",
) -> None:
    audit.record(category=category, action=action, result=result, email=email, ip=ip, reason=reason)


# --- sign in / sign up --------------------------------------------------------------------------


def sign_in(profile: Profile, *, ip: str | None = None) -> SignedIn:
    try:
        return _sign_in(profile, ip)
    except IntegrityError:
        # A concurrent callback made the connection or took the email first: decide again.
        return _sign_in(profile, ip)


def _sign_in(profile: Profile, ip: str | None) -> SignedIn:
    label = _label(profile.provider)
    connection = (
        OAuthConnection.objects.select_related("user")
        .filter(provider_name=profile.provider, provider_id=profile.provider_id)
        .first()
    )
    if connection is not None:
        return SignedIn(_sign_in_connected(connection, profile, ip), created=False)
    email = profile.email
    if email is None:
        _audit("social_login", "failure", None, ip, f"{profile.provider}:email_unverified")
        raise ProviderEmailUnverified(
            f"Your {label} account has no verified email address. Verify one at {label}, or "
            "sign up with an email and password.",
            details={"provider": profile.provider},
        )
    if User.objects.filter(email=email).exists():
        _audit("social_login", "failure", email, ip, f"{profile.provider}:sign_in_to_link")
        raise SignInToLink(
            f"A Kody account already uses the email address of this {label} account. Sign in to "
            f"that account first, then link {label} from your account's Connections page.",
            details={"provider": profile.provider},
        )
    if _claimed_by_other(email, None):
        _audit("social_login", "failure", email, ip, f"{profile.provider}:former_email_claimed")
        raise FormerEmailClaimed(
            "This address still belongs to an existing account as a former email. Its owner "
            "can release it from their account settings.",
            details={"provider": profile.provider},
        )
    with transaction.atomic():
        user = User.objects.create_user(
            username=_username_for(profile),
            email=email,
            password=None,  # no password: the provider is the way in until one is set
            stable_user_id=_mint_stable_user_id(email),
            email_verified_at=timezone.now(),
        )
        _claim(user, email)
        OAuthConnection.objects.create(
            provider_name=profile.provider,
            provider_id=profile.provider_id,
            user=user,
            provider_display_name=profile.display_name or None,
        )
    _audit("signup", "success", email, ip, f"social:{profile.provider}", category="account")
    return SignedIn(user, created=True)


def _sign_in_connected(connection: OAuthConnection, profile: Profile, ip: str | None) -> User:
    user = connection.user
    if policy.is_deleting(user):
        _audit("social_login", "failure", user.email, ip, f"{profile.provider}:account_deleting")
        raise AccountDeleting("This account is being deleted; it can no longer be signed in to.")
    if not policy.may_act(user):
        _audit("social_login", "failure", user.email, ip, f"{profile.provider}:account_suspended")
        raise AccountSuspended()
    if profile.display_name and profile.display_name != connection.provider_display_name:
        OAuthConnection.objects.filter(pk=connection.pk).update(
            provider_display_name=profile.display_name, updated_at=timezone.now()
        )
    _audit("social_login", "success", user.email, ip, profile.provider)
    return user


_NOT_USERNAME = re.compile(r"[^a-z0-9]+")


def _username_for(profile: Profile) -> str:
    """A free, valid username from the provider login (or the email's local part)."""
    seed = profile.login or (profile.email or "").split("@", 1)[0]
    base = _NOT_USERNAME.sub("-", seed.lower()).strip("-")[: usernames.MAX_LENGTH - 5].strip("-")
    if len(base) < usernames.MIN_LENGTH:
        base = f"{base}-user".strip("-")
    candidates = [base] + [f"{base}-{secrets.randbelow(9000) + 1000}" for _ in range(8)]
    for candidate in candidates + [f"user-{secrets.token_hex(6)}"]:
        if usernames.format_error(candidate) or usernames.is_reserved(candidate):
            continue
        if not User.objects.filter(username__iexact=candidate).exists():
            return candidate
    raise Conflict("No username is free for this account; sign up with a password instead.")


# --- link, unlink, list -------------------------------------------------------------------------


def link(user: User, profile: Profile, *, ip: str | None = None) -> tuple[OAuthConnection, bool]:
    """Link the provider account to the signed-in ``user``; (connection, newly linked)."""
    label = _label(profile.provider)
    with transaction.atomic():
        locked = _lock_user(user.pk)
        existing = OAuthConnection.objects.filter(
            provider_name=profile.provider, provider_id=profile.provider_id
        ).first()
        if existing is not None and existing.user_id != locked.pk:
            _audit("social_link", "failure", locked.email, ip, f"{profile.provider}:taken")
            raise ConnectionTaken(
                f"This {label} account is already linked to another Kody account. Unlink it "
                "there first.",
                details={"provider": profile.provider},
            )
        if existing is not None:
            return existing, False
        try:
            with transaction.atomic():
                connection = OAuthConnection.objects.create(
                    provider_name=profile.provider,
                    provider_id=profile.provider_id,
                    user=locked,
                    provider_display_name=profile.display_name or None,
                )
        except IntegrityError:
            raise ConnectionTaken(
                f"This {label} account was just linked to another Kody account.",
                details={"provider": profile.provider},
            ) from None
        if profile.email == locked.email and locked.email_verified_at is None:
            # The provider vouches for the address this signed-in account uses.
            locked.email_verified_at = timezone.now()
            locked.save(update_fields=["email_verified_at", "updated_at"])
            _claim(locked, locked.email)
    _audit("social_link", "success", locked.email, ip, profile.provider)
    return connection, True


def unlink(user: User, connection_id: int, *, ip: str | None = None) -> OAuthConnection:
    with transaction.atomic():
        locked = _lock_user(user.pk)  # serializes removals: the count below stays true
        connection = OAuthConnection.objects.filter(pk=connection_id, user_id=locked.pk).first()
        if connection is None:
            raise ConnectionNotFound()
        try:
            refuse_if_last(locked)
        except KodyError:
            _audit("social_unlink", "failure", locked.email, ip, "last_sign_in_method")
            raise
        connection.delete()
    _audit("social_unlink", "success", locked.email, ip, connection.provider_name)
    return connection


def list_connections(user: User) -> list[dict[str, Any]]:
    rows = OAuthConnection.objects.filter(user_id=user.pk).order_by("created_at", "pk")
    return [
        {
            "id": row.pk,
            "provider": row.provider_name,
            "providerLabel": _label(row.provider_name),
            "displayName": row.provider_display_name or "",
            "createdAt": row.created_at.isoformat(),
        }
        for row in rows
    ]
