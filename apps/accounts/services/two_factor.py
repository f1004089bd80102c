"""TOTP two-factor with recovery codes, on django-otp (ADR 0057).

One TOTP device per person (an authenticator app) plus one static device holding ten single-use
recovery codes, stored only as keyed digests (``recovery_codes``). Enrolment is two steps: ``start``
makes an unconfirmed device whose secret the person adds to their app, ``confirm`` checks a first
code from it and only then turns two-factor on. Once on, a signed-in session counts as verified only
after ``verify`` (see ``apps.accounts.two_factor_gate``). Every outcome is an ``auth`` audit event;
django-otp's device throttling slows guessing (each failure doubles the wait).
"""

from __future__ import annotations

from django.db import transaction
from django_otp import devices_for_user, user_has_device
from django_otp.models import Device
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.accounts.models import User
from apps.accounts.services import audit, recovery_codes
from kody.errors import InvalidInput

RECOVERY_CODES = 10
AUTHENTICATOR = "authenticator"
RECOVERY = "recovery codes"


def enabled(user: User) -> bool:
    return user.is_authenticated and user_has_device(user, confirmed=True)


def pending(user: User) -> TOTPDevice | None:
    return TOTPDevice.objects.filter(user=user, confirmed=False).first()


def start(user: User) -> TOTPDevice:
    """A fresh unconfirmed authenticator (replacing an earlier unfinished one)."""
    if enabled(user):
        raise InvalidInput("Two-factor is already on; turn it off first to change the app.")
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user, confirmed=False).delete()
        return TOTPDevice.objects.create(user=user, name=AUTHENTICATOR, confirmed=False)


def confirm(user: User, code: str, *, ip: str | None = None) -> list[str]:
    """Turn two-factor on with a first code from the app; returns the recovery codes, once."""
    device = pending(user)
    if device is None or not device.verify_token(_digits(code)):
        _audit(user, "two_factor_enable", "failure", ip, "bad_code")
        raise InvalidInput(
            "That code is not the one your app shows now.", details={"field": "code"}
        )
    with transaction.atomic():
        device.confirmed = True
        device.save(update_fields=["confirmed"])
        codes = _new_recovery_codes(user)
    _audit(user, "two_factor_enable", "success", ip)
    return codes


def regenerate(user: User, *, ip: str | None = None) -> list[str]:
    if not enabled(user):
        raise InvalidInput("Two-factor is off.")
    with transaction.atomic():
        codes = _new_recovery_codes(user)
    _audit(user, "two_factor_recovery_codes", "success", ip)
    return codes


def verify(user: User, code: str, *, ip: str | None = None) -> Device | None:
    """The device that accepts ``code`` (a recovery code is used up), or None."""
    with transaction.atomic():
        for device in devices_for_user(user, for_verify=True):
            if isinstance(device, StaticDevice):
                ok = recovery_codes.use(device, code)
            else:
                ok = device.verify_is_allowed()[0] and device.verify_token(_digits(code))
            if ok:
                kind = "recovery_code" if isinstance(device, StaticDevice) else "totp"
                _audit(user, "two_factor_verify", "success", ip, kind)
                return device
    _audit(user, "two_factor_verify", "failure", ip, "bad_code")
    return None


def disable(user: User, code: str, *, ip: str | None = None) -> None:
    """Off again, only with a current code (or a recovery code): a stolen session is not enough."""
    if verify(user, code, ip=ip) is None:
        raise InvalidInput("That code is not valid.", details={"field": "code"})
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user).delete()
        StaticDevice.objects.filter(user=user).delete()
    _audit(user, "two_factor_disable", "success", ip)


def remaining_recovery_codes(user: User) -> int:
    return StaticToken.objects.filter(device__user=user).count()


def _new_recovery_codes(user: User) -> list[str]:
    device, _ = StaticDevice.objects.get_or_create(
        user=user, name=RECOVERY, defaults={"confirmed": True}
    )
    return recovery_codes.store(device, RECOVERY_CODES)


def _digits(code: str) -> str:
    return "".join(ch for ch in code if ch.isdigit())[:10]


def _audit(user: User, action: str, result: str, ip: str | None, reason: str | None = None) -> None:
    audit.record(
        category="auth", action=action, result=result, email=user.email, ip=ip, reason=reason
    )


def verify_device_for_session(user: User) -> TOTPDevice:
    """The confirmed authenticator that has just proved itself during ``confirm``."""
    return TOTPDevice.objects.get(user=user, confirmed=True)
