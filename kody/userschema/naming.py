"""Schema names: deterministic from the stable user id, validated before they reach SQL."""

from __future__ import annotations

import hashlib
import re

PREFIX = "u_"
# 2 + 60 characters stays inside Postgres' 63-byte identifier limit; 240 bits of the id is
# far past any realistic collision, and the registry's unique constraint catches one anyway.
DIGEST_CHARS = 60

_STABLE_ID = re.compile(r"^[0-9a-f]{64}$")
_SCHEMA = re.compile(rf"^{PREFIX}[0-9a-f]{{{DIGEST_CHARS}}}$")


def schema_name_for(user_id: str) -> str:
    if not user_id or len(user_id) > 255:
        raise ValueError("a stable user id is required")
    digest = user_id if _STABLE_ID.match(user_id) else hashlib.sha256(user_id.encode()).hexdigest()
    return PREFIX + digest[:DIGEST_CHARS]


def checked(schema: str) -> str:
    if not _SCHEMA.match(schema):
        raise ValueError(f"not a user schema name: {schema!r}")
    return schema


def quoted(schema: str) -> str:
    return f'"{checked(schema)}"'


def like_pattern() -> str:
    """A LIKE pattern matching every user schema (for fleet listings and test cleanup)."""
    return PREFIX.replace("_", r"\_") + "%"
