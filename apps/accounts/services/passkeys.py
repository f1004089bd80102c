"""Passkeys (WebAuthn) on the ``webauthn`` package: register, sign in, second factor, manage.

The browser's ``navigator.credentials`` calls run in ``static/kody-passkeys.js``; everything it
sends back is hostile until the library has checked it against a challenge this server minted.
A challenge lives in the session, is bound to one purpose (and, for registration and the second
factor, to one person), expires after ``CHALLENGE_SECONDS`` and is spent by the first answer,
right or wrong. User verification (the authenticator's PIN or biometric) is required on every
ceremony, so a passkey alone is something you have plus something you are or know.

The relying party is the host of ``settings.SITE_URL`` and the expected origin is that URL's
origin: an answer made for another site (or another port) is refused.

Failures draw on the same per-account and per-IP budgets as password sign-in, and every
outcome is an ``auth`` audit event.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.sessions.backends.base import SessionBase
from django.core.cache import cache
from django.db import IntegrityError, transaction
from django.utils import timezone
from webauthn import (
    generate_authentication_options,
    generate_registration_options,
    options_to_json,
    verify_authentication_response,
    verify_registration_response,
)
from webauthn.helpers import (
    base64url_to_bytes,
    bytes_to_base64url,
    parse_authentication_credential_json,
    parse_registration_credential_json,
)
from webauthn.helpers.exceptions import WebAuthnException
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    AuthenticatorTransport,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from apps.accounts import policy
from apps.accounts.models import Passkey, User
from apps.accounts.services import audit
from apps.accounts.services.identity_rules import AccountSuspended, _lock_user
from apps.accounts.services.login import _count_failure, _failures, _login_keys
from apps.accounts.services.sign_in_methods import LastSignInMethod, refuse_if_last
from kody.errors import AccountDeleting, InvalidInput, NotFound, RateLimited

CHALLENGE_SECONDS = 5 * 60
MAX_PASSKEYS = 20
NAME_MAX = 64
CREDENTIAL_MAX_BYTES = 16 * 1024  # a real answer is a few hundred bytes to a few kilobytes
REGISTER, SIGN_IN, SECOND_FACTOR = "register", "sign_in", "second_factor"
_SESSION_KEY = "kody.webauthn.challenge"
_TRANSPORTS = {t.value for t in AuthenticatorTransport}


class PasskeyRefused(InvalidInput):
    code = "passkey_refused"
    message = "That passkey answer was not accepted. Try again."


@dataclass(frozen=True)
class RegisteredPasskey:
    id: str
    name: str


def relying_party() -> tuple[str, str]:
    """(rp id, expected origin), both from ``SITE_URL``."""
    parts = urlsplit(settings.SITE_URL)
    return (parts.hostname or "localhost"), f"{parts.scheme}://{parts.netloc}"


# --- challenges -------------------------------------------------------------------------------


def _remember(
    session: SessionBase, purpose: str, challenge: bytes, user: User | None, handle: str = ""
) -> None:
    session[_SESSION_KEY] = {
        "purpose": purpose,
        "handle": handle,
        "challenge": bytes_to_base64url(challenge),
        "user": user.pk if user is not None else None,
        "at": timezone.now().timestamp(),
    }


def _spend(session: SessionBase, purpose: str, user: User | None) -> tuple[bytes, str]:
    """The pending challenge for ``purpose`` (and ``user``), removed whatever happens next."""
    state = session.pop(_SESSION_KEY, None)
    if (
        not isinstance(state, dict)
        or state.get("purpose") != purpose
        or state.get("user") != (user.pk if user is not None else None)
        or timezone.now().timestamp() - float(state.get("at", 0)) > CHALLENGE_SECONDS
    ):
        raise PasskeyRefused("This passkey request expired. Start again.")
    return base64url_to_bytes(str(state["challenge"])), str(state.get("handle") or "")


def _parse(raw: str | bytes, kind: str) -> Any:
    if len(raw) > CREDENTIAL_MAX_BYTES:
        raise PasskeyRefused("That passkey answer is too large.")
    try:
        if kind == REGISTER:
            return parse_registration_credential_json(raw)
        return parse_authentication_credential_json(raw)
    except (WebAuthnException, ValueError, TypeError, KeyError) as exc:
        raise PasskeyRefused("That passkey answer is malformed.") from exc


def _descriptors(user: User) -> list[PublicKeyCredentialDescriptor]:
    out = []
    for key in Passkey.objects.filter(user=user).order_by("created_at"):
        transports = [
            AuthenticatorTransport(t) for t in (key.transports or "").split(",") if t in _TRANSPORTS
        ]
        out.append(
            PublicKeyCredentialDescriptor(
                id=base64url_to_bytes(key.id), transports=transports or None
            )
        )
    return out


# --- registration -----------------------------------------------------------------------------


def registration_options(session: SessionBase, user: User) -> str:
    """The ``PublicKeyCredentialCreationOptions`` JSON for a new passkey of ``user``."""
    if Passkey.objects.filter(user=user).count() >= MAX_PASSKEYS:
        raise InvalidInput(f"You have {MAX_PASSKEYS} passkeys; remove one to add another.")
    rp_id, _ = relying_party()
    handle = _user_handle(user)
    options = generate_registration_options(
        rp_id=rp_id,
        rp_name="Kody",
        user_id=handle,
        user_name=user.username,
        user_display_name=user.username,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED,
            user_verification=UserVerificationRequirement.REQUIRED,
        ),
        exclude_credentials=_descriptors(user),
    )
    _remember(session, REGISTER, options.challenge, user, bytes_to_base64url(handle))
    return options_to_json(options)


def _user_handle(user: User) -> bytes:
    """One random handle per person, shared by all their passkeys (never the database id)."""
    existing = (
        Passkey.objects.filter(user=user).values_list("webauthn_user_handle", flat=True).first()
    )
    return base64url_to_bytes(existing) if existing else secrets.token_bytes(32)


def register(
    session: SessionBase, user: User, raw: str | bytes, name: str, *, ip: str | None = None
) -> RegisteredPasskey:
    expected, handle = _spend(session, REGISTER, user)
    credential = _parse(raw, REGISTER)
    rp_id, origin = relying_party()
    try:
        verified = verify_registration_response(
            credential=credential,
            expected_challenge=expected,
            expected_rp_id=rp_id,
            expected_origin=origin,
            require_user_verification=True,
        )
    except WebAuthnException as exc:
        _audit(user.email, "passkey_register", "failure", ip, "verification_failed")
        raise PasskeyRefused() from exc
    transports = ",".join(
        t.value for t in (credential.response.transports or []) if t.value in _TRANSPORTS
    )
    key = Passkey(
        id=bytes_to_base64url(verified.credential_id),
        aaguid=verified.aaguid,
        public_key=bytes_to_base64url(verified.credential_public_key),
        user=user,
        webauthn_user_handle=handle,
        counter=verified.sign_count,
        device_type=verified.credential_device_type.value,
        backed_up=verified.credential_backed_up,
        transports=transports or None,
        name=_clean_name(name) or _default_name(user),
    )
    try:
        with transaction.atomic():
            if Passkey.objects.select_for_update().filter(user=user).count() >= MAX_PASSKEYS:
                raise InvalidInput(f"You have {MAX_PASSKEYS} passkeys; remove one to add another.")
            if Passkey.objects.filter(pk=key.id).exists():
                raise IntegrityError("credential id taken")
            key.save(force_insert=True)
    except IntegrityError as exc:
        _audit(user.email, "passkey_register", "failure", ip, "duplicate_credential")
        raise PasskeyRefused("That passkey is already registered.") from exc
    _audit(user.email, "passkey_register", "success", ip)
    return RegisteredPasskey(id=key.id, name=key.name)


def _clean_name(name: str) -> str:
    return " ".join((name or "").split())[:NAME_MAX]


def _default_name(user: User) -> str:
    return f"Passkey {Passkey.objects.filter(user=user).count() + 1}"


# --- sign-in and second factor ----------------------------------------------------------------


def authentication_options(session: SessionBase, user: User | None = None) -> str:
    """Options for a sign-in (``user`` None: any discoverable passkey of this site) or for the
    second factor of ``user``'s signed-in session (only that person's passkeys)."""
    rp_id, _ = relying_party()
    allow = None
    if user is not None:
        allow = _descriptors(user)
        if not allow:
            raise NotFound("You have no passkeys.")
    options = generate_authentication_options(
        rp_id=rp_id,
        allow_credentials=allow,
        user_verification=UserVerificationRequirement.REQUIRED,
    )
    _remember(session, SIGN_IN if user is None else SECOND_FACTOR, options.challenge, user)
    return options_to_json(options)


def authenticate(
    session: SessionBase, raw: str | bytes, *, user: User | None = None, ip: str | None = None
) -> Passkey:
    """Check a sign-in answer (``user`` None) or ``user``'s second-factor answer. Returns the
    passkey used, its counter and last use updated; raises ``PasskeyRefused`` otherwise."""
    purpose = SIGN_IN if user is None else SECOND_FACTOR
    action = "passkey_login" if user is None else "passkey_verify"
    expected, _ = _spend(session, purpose, user)
    credential = _parse(raw, purpose)
    key = Passkey.objects.select_related("user").filter(pk=credential.id).first()
    # Failures count against the signed-in person (second factor) or the passkey's owner.
    account = user if user is not None else (key.user if key is not None else None)
    budgets = _login_keys(account, f"passkey:{credential.id[:200]}", ip)
    email = account.email if account is not None else None
    if any(_failures(k) >= limit for k, limit in budgets):
        _audit(email, action, "rate_limited", ip)
        raise RateLimited("Too many failed sign-in attempts. Wait 15 minutes and try again.")

    def refuse(reason: str) -> PasskeyRefused:
        for k, _ in budgets:
            _count_failure(k)
        _audit(email, action, "failure", ip, reason)
        return PasskeyRefused()

    # Someone else's passkey is as unknown as no passkey at all.
    if key is None or (user is not None and key.user_id != user.pk):
        raise refuse("unknown_credential")
    if credential.response.user_handle is not None and key.webauthn_user_handle:
        if bytes_to_base64url(credential.response.user_handle) != key.webauthn_user_handle:
            raise refuse("user_handle_mismatch")
    rp_id, origin = relying_party()
    try:
        verified = verify_authentication_response(
            credential=credential,
            expected_challenge=expected,
            expected_rp_id=rp_id,
            expected_origin=origin,
            credential_public_key=base64url_to_bytes(key.public_key),
            credential_current_sign_count=key.counter,
            require_user_verification=True,
        )
    except WebAuthnException as exc:
        raise refuse("verification_failed") from exc
    if user is None:
        if policy.is_deleting(key.user):
            _audit(email, action, "failure", ip, "account_deleting")
            raise AccountDeleting("This account is being deleted.")
        if not policy.may_act(key.user):
            _audit(email, action, "failure", ip, "account_suspended")
            raise AccountSuspended()
    with transaction.atomic():
        row = Passkey.objects.select_for_update().get(pk=key.pk)
        # Two answers racing with the same counter: the second one is a clone or a replay.
        if verified.new_sign_count and verified.new_sign_count <= row.counter:
            raise refuse("counter_regressed")
        row.counter = verified.new_sign_count
        row.backed_up = verified.credential_backed_up
        row.last_used_at = timezone.now()
        row.save(update_fields=["counter", "backed_up", "last_used_at", "updated_at"])
    cache.delete(budgets[0][0])
    _audit(email, action, "success", ip)
    return row


# --- the person's list ------------------------------------------------------------------------


def for_user(user: User) -> list[Passkey]:
    return list(Passkey.objects.filter(user=user).order_by("created_at", "id"))


def _own(user: User, passkey_id: str) -> Passkey:
    key = Passkey.objects.filter(user=user, pk=passkey_id).first()
    if key is None:
        raise NotFound("No such passkey.")
    return key


def rename(user: User, passkey_id: str, name: str, *, ip: str | None = None) -> Passkey:
    key = _own(user, passkey_id)
    cleaned = _clean_name(name)
    if not cleaned:
        raise InvalidInput("Give the passkey a name.", details={"field": "name"})
    key.name = cleaned
    key.save(update_fields=["name", "updated_at"])
    _audit(user.email, "passkey_rename", "success", ip)
    return key


def remove(user: User, passkey_id: str, *, ip: str | None = None) -> None:
    """Delete one of the person's passkeys, unless it is their last way to sign in."""
    with transaction.atomic():
        locked = _lock_user(user.pk)  # serializes removals: the count below stays true
        key = _own(locked, passkey_id)
        try:
            refuse_if_last(locked)
        except LastSignInMethod:
            _audit(locked.email, "passkey_delete", "failure", ip, "last_sign_in_method")
            raise
        key.delete()
    _audit(user.email, "passkey_delete", "success", ip)


def _audit(
    email: str | None, action: str, result: str, ip: str | None, reason: str | None = None
) -> None:
    audit.record(category="auth", action=action, result=result, email=email, ip=ip, reason=reason)


def credential_json(body: bytes) -> tuple[str, str]:
    """(credential JSON, name) from a request body ``{"credential": {...}, "name": "..."}``."""
    if len(body) > CREDENTIAL_MAX_BYTES:
        raise PasskeyRefused("That passkey answer is too large.")
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PasskeyRefused("That passkey answer is malformed.") from exc
    if not isinstance(data, dict) or not isinstance(data.get("credential"), dict):
        raise PasskeyRefused("That passkey answer is malformed.")
    name = data.get("name")
    return json.dumps(data["credential"]), name if isinstance(name, str) else ""
