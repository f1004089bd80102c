"""A software WebAuthn authenticator for server-side tests: a P-256 key pair per credential,
"none" attestation, and the exact bytes a platform authenticator would return (authenticator
data, client data JSON, DER ECDSA signature), encoded as the browser's JSON answer.

It speaks the protocol only; every check happens in the server under test."""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

UP, UV, BE, BS, AT = 0x01, 0x04, 0x08, 0x10, 0x40


def _b64(data: bytes) -> str:
    return bytes_to_base64url(data)


@dataclass
class Credential:
    rp_id: str
    user_handle: bytes
    id: bytes = field(default_factory=lambda: os.urandom(32))
    key: ec.EllipticCurvePrivateKey = field(
        default_factory=lambda: ec.generate_private_key(ec.SECP256R1())
    )
    sign_count: int = 0

    def cose_public_key(self) -> bytes:
        numbers = self.key.public_key().public_numbers()
        return cbor2.dumps(
            {
                1: 2,  # kty EC2
                3: -7,  # alg ES256
                -1: 1,  # crv P-256
                -2: numbers.x.to_bytes(32, "big"),
                -3: numbers.y.to_bytes(32, "big"),
            }
        )


class SoftAuthenticator:
    """Holds credentials like a password manager would, answering as Chromium does."""

    def __init__(self, origin: str, rp_id: str, *, user_verified: bool = True) -> None:
        self.origin, self.rp_id, self.user_verified = origin, rp_id, user_verified
        self.credentials: list[Credential] = []

    def _flags(self, extra: int = 0) -> int:
        return UP | (UV if self.user_verified else 0) | BE | BS | extra

    def _client_data(self, kind: str, challenge: str, origin: str | None) -> bytes:
        data = {"type": kind, "challenge": challenge, "origin": origin or self.origin}
        return json.dumps({**data, "crossOrigin": False}).encode()

    def create(
        self,
        options: dict[str, Any],
        *,
        origin: str | None = None,
        reuse: Credential | None = None,
    ) -> dict[str, Any]:
        """``navigator.credentials.create`` for the server's creation options JSON. ``reuse``
        makes a misbehaving authenticator that presents an existing credential id again."""
        assert options["rp"]["id"] == self.rp_id
        excluded = {c["id"] for c in options.get("excludeCredentials", [])}
        if reuse is None:
            assert not excluded & {_b64(c.id) for c in self.credentials}, "already registered"
        cred = Credential(self.rp_id, base64url_to_bytes(options["user"]["id"]))
        if reuse is not None:
            cred.id = reuse.id
        attested = b"\x00" * 16 + struct.pack(">H", len(cred.id)) + cred.id
        auth_data = (
            hashlib.sha256(self.rp_id.encode()).digest()
            + bytes([self._flags(AT)])
            + struct.pack(">I", cred.sign_count)
            + attested
            + cred.cose_public_key()
        )
        attestation = cbor2.dumps({"fmt": "none", "attStmt": {}, "authData": auth_data})
        client_data = self._client_data("webauthn.create", options["challenge"], origin)
        self.credentials.append(cred)
        return {
            "id": _b64(cred.id),
            "rawId": _b64(cred.id),
            "type": "public-key",
            "response": {
                "clientDataJSON": _b64(client_data),
                "attestationObject": _b64(attestation),
                "transports": ["internal", "hybrid"],
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }

    def get(
        self,
        options: dict[str, Any],
        *,
        credential: Credential | None = None,
        origin: str | None = None,
    ) -> dict[str, Any]:
        """``navigator.credentials.get``: answers with ``credential`` or the first allowed one."""
        allowed = {c["id"] for c in options.get("allowCredentials", [])}
        if credential is None:
            credential = next(c for c in self.credentials if not allowed or _b64(c.id) in allowed)
        credential.sign_count += 1
        auth_data = (
            hashlib.sha256(self.rp_id.encode()).digest()
            + bytes([self._flags()])
            + struct.pack(">I", credential.sign_count)
        )
        client_data = self._client_data("webauthn.get", options["challenge"], origin)
        signed = auth_data + hashlib.sha256(client_data).digest()
        signature = credential.key.sign(signed, ec.ECDSA(hashes.SHA256()))
        return {
            "id": _b64(credential.id),
            "rawId": _b64(credential.id),
            "type": "public-key",
            "response": {
                "clientDataJSON": _b64(client_data),
                "authenticatorData": _b64(auth_data),
                "signature": _b64(signature),
                "userHandle": _b64(credential.user_handle),
            },
            "clientExtensionResults": {},
            "authenticatorAttachment": "platform",
        }
