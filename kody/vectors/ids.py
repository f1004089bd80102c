"""Vector id builders (seed 000, "Vectorize metadata contracts").

A user-owned id is ``{prefix}_{raw}`` when that fits in 64 UTF-8 bytes, else the deterministic
``{prefix}_sha256:{digest}`` with the SHA-256 hex digest truncated to fit, so an upsert and a
later delete always name the same vector.
"""

from __future__ import annotations

import hashlib

MAX_ID_BYTES = 64


def vector_id(prefix: str, raw: str) -> str:
    plain = f"{prefix}_{raw}"
    if len(plain.encode()) <= MAX_ID_BYTES:
        return plain
    head = f"{prefix}_sha256:"
    room = MAX_ID_BYTES - len(head.encode())
    if room < 16:
        raise ValueError(f"vector id prefix {prefix!r} leaves no room for a digest")
    return head + hashlib.sha256(raw.encode()).hexdigest()[:room]


def parse(prefix: str, vid: str) -> str | None:
    """The raw id of a passthrough id; ``None`` for the digest form or another prefix."""
    head = f"{prefix}_"
    if not vid.startswith(head) or vid.startswith(f"{prefix}_sha256:"):
        return None
    return vid[len(head) :]
