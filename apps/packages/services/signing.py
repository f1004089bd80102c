"""``secretJwtSign``: a JWT signed with one of the user's stored secrets, which stays sealed.

HS256/384/512 use the secret as the HMAC key; RS256/ES256 (and their 384/512 forms) need a
PEM private key as the secret. Anything the JWT library says about a bad key is reduced to a
coded error that names the secret, never its value.
"""

from __future__ import annotations

from typing import Any

import jwt

from apps.packages.services import secrets as secrets_service
from kody.errors import InvalidInput

ALGORITHMS = ("HS256", "HS384", "HS512", "RS256", "RS384", "RS512", "ES256", "ES384", "ES512")
MAX_CLAIMS_BYTES = 16_384


class SigningFailed(InvalidInput):
    code = "jwt_sign_failed"
    message = "The secret cannot sign with that algorithm."


def sign(user_id: str, secret_name: str, claims: dict[str, Any], alg: str = "HS256") -> str:
    if alg not in ALGORITHMS:
        raise InvalidInput("Unknown algorithm.", details={"alg": alg, "allowed": ALGORITHMS})
    key = secrets_service.resolve_for_signing(user_id, secret_name)
    try:
        return jwt.encode(claims, key, algorithm=alg)
    except Exception:  # noqa: BLE001 - the library's message may quote the key
        raise SigningFailed(details={"secretName": secret_name, "alg": alg}) from None
