"""Recovery codes, kept only as keyed digests.

django-otp's static plugin stores its tokens as they are; here a code is shown to the person
once, when it is made, and the ``otp_static_statictoken.token`` column holds
``HMAC-SHA256(SECRET_KEY, code)`` cut to the column's sixteen characters (80 bits of base32).
Codes are 80 random bits, so a fast keyed hash is enough: without the key a stolen table gives
nothing to try, and with it there is still 2**80 to search per code. Checking compares the
digest against every code of the device in constant time, and the one matched is deleted by
primary key, so of two racing uses only one wins. ``SECRET_KEY_FALLBACKS`` keep accepting codes
made before a key rotation.
"""

from __future__ import annotations

import hmac
from base64 import b32encode
from secrets import token_bytes

from django.conf import settings
from django.db import transaction
from django.utils.crypto import salted_hmac
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken

SALT = "kody.accounts.recovery-code"
DIGEST_CHARS = 16  # the width of django-otp's token column
CODE_BYTES = 10  # 80 bits → 16 base32 characters


def new_code() -> str:
    """A fresh code as the person sees it: four groups of four base32 characters."""
    raw = b32encode(token_bytes(CODE_BYTES)).decode().lower()
    return "-".join(raw[i : i + 4] for i in range(0, len(raw), 4))


def normalize(code: str) -> str:
    """What is hashed: case, spaces and dashes do not matter when a person types a code."""
    return "".join(ch for ch in code.lower() if ch not in " -\t\n")[:64]


def digest(code: str, *, secret: str | None = None) -> str:
    mac = salted_hmac(SALT, normalize(code), secret=secret, algorithm="sha256").digest()
    return b32encode(mac).decode().lower()[:DIGEST_CHARS]


def _digests(code: str) -> list[str]:
    keys = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return [digest(code, secret=key) for key in keys]


def store(device: StaticDevice, count: int) -> list[str]:
    """Replace the device's codes with ``count`` new ones; the plain codes are returned once."""
    codes = [new_code() for _ in range(count)]
    device.token_set.all().delete()
    StaticToken.objects.bulk_create(StaticToken(device=device, token=digest(c)) for c in codes)
    return codes


def use(device: StaticDevice, code: str) -> bool:
    """Spend ``code`` on ``device``: True once for a right code, with django-otp's throttling."""
    if not device.verify_is_allowed()[0]:
        return False
    candidates = _digests(code)
    with transaction.atomic():
        matched: int | None = None
        for pk, stored in StaticToken.objects.filter(device=device).values_list("pk", "token"):
            hit = False
            for candidate in candidates:  # no early exit: every stored digest is compared
                hit |= hmac.compare_digest(stored.encode(), candidate.encode())
            if hit and matched is None:
                matched = pk
        spent = matched is not None and StaticToken.objects.filter(pk=matched).delete()[0] == 1
        if spent:
            device.throttle_reset(commit=False)
            device.set_last_used_timestamp(commit=False)
            device.save()
        else:
            device.throttle_increment()
    return spent
