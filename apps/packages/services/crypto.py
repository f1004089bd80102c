"""AES-GCM for secret entries, with a keyring so keys can rotate.

``KODY_SECRET_KEYS`` lists ``id:base64-key`` pairs (32-byte keys), ``KODY_SECRET_KEY_ID`` names
the one new writes use; every row stores the id of the key that sealed it, and
``manage.py rotate_secret_key`` re-seals old rows. Without configured keys, one key (``k0``)
is derived from ``SECRET_KEY`` with HKDF, so development needs no setup.

Moving from the derived key to configured keys must not strand the rows it sealed: unless
``KODY_SECRET_KEYS`` defines ``k0`` itself, the derived ``k0`` stays in the keyring to open
them (never to seal) until ``rotate_secret_key`` has re-sealed every one — after that no row
names it, so nothing ever uses it again. ``SECRET_KEY`` must not change before then.

The associated data binds a ciphertext to its owner, bucket and name: a sealed value copied
into another row, or another user's bucket, does not decrypt.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from functools import cache

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

NONCE_BYTES = 12
DERIVED_KEY_ID = "k0"


class Undecryptable(Exception):
    """The row's key is missing or the ciphertext does not match its associated data."""


@dataclass(frozen=True)
class Keyring:
    keys: dict[str, bytes]
    current: str


@cache
def keyring() -> Keyring:
    configured = settings.KODY_SECRET_KEYS
    if not configured:
        return Keyring({DERIVED_KEY_ID: _derived()}, DERIVED_KEY_ID)
    keys: dict[str, bytes] = {}
    for pair in configured:
        key_id, _, encoded = pair.partition(":")
        key = base64.b64decode(encoded)
        if not key_id or len(key) != 32:
            raise ImproperlyConfigured("KODY_SECRET_KEYS entries are id:base64(32 bytes)")
        keys[key_id] = key
    current = settings.KODY_SECRET_KEY_ID or next(iter(keys))
    if current not in keys:
        raise ImproperlyConfigured(f"KODY_SECRET_KEY_ID {current!r} is not in KODY_SECRET_KEYS")
    # Rows sealed before keys were configured still name k0: keep opening them.
    keys.setdefault(DERIVED_KEY_ID, _derived())
    return Keyring(keys, current)


def _derived() -> bytes:
    return HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"kody secret entries v1"
    ).derive(settings.SECRET_KEY.encode())


def seal(plaintext: str, aad: str) -> tuple[str, str]:
    """(key id, base64 nonce+ciphertext) for ``plaintext`` under the current key."""
    ring = keyring()
    nonce = os.urandom(NONCE_BYTES)
    sealed = AESGCM(ring.keys[ring.current]).encrypt(nonce, plaintext.encode(), aad.encode())
    return ring.current, base64.b64encode(nonce + sealed).decode()


def open_sealed(key_id: str, token: str, aad: str) -> str:
    key = keyring().keys.get(key_id)
    if key is None:
        raise Undecryptable(f"no key {key_id!r} in the keyring")
    raw = base64.b64decode(token)
    try:
        plain = AESGCM(key).decrypt(raw[:NONCE_BYTES], raw[NONCE_BYTES:], aad.encode())
    except InvalidTag as exc:
        raise Undecryptable("ciphertext does not match its row") from exc
    return plain.decode()
