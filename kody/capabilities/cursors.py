"""The schema of a list's ``cursor``: what a caller may pass is stated, not implied.

A cursor is opaque: what a caller passes back is the ``nextCursor`` the list handed out (for the
same list and the same filters). A string the list cannot read as one of its own cursors —
typed by hand, cut short, taken from another list — is refused with a coded 4xx; a list that
pages by a readable position (a storage key) may read an edited one as that position, which
only ever moves within the caller's own data. Every list's
``cursor`` property is built here, so the API schema says this the same way everywhere and the
schema check can find the property by its mark.
"""

from __future__ import annotations

from typing import Any

# Marks a property as an issued cursor (an OpenAPI ``x-`` extension; validators ignore it).
MARK = "x-kody-cursor"
DESCRIPTION = (
    "Opaque: the nextCursor of the previous page of this same list, passed back unchanged "
    "(leave it out for the first page). A string the list cannot read as one of its own "
    "cursors is refused with a 4xx error."
)


def cursor_schema(
    max_length: int, *, nullable: bool = False, min_length: int = 0
) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": ["string", "null"] if nullable else "string",
        "maxLength": max_length,
        "description": DESCRIPTION,
        MARK: True,
    }
    if min_length:
        schema["minLength"] = min_length
    return schema
