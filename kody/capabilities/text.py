"""Text every capability refuses before its handler runs, and how much of it an error repeats.

Postgres cannot store U+0000 in ``text``/``jsonb``, and a lone surrogate (U+D800–U+DFFF) cannot
be encoded as UTF-8 at all: either one reaching a handler used to surface as a 500 carrying the
driver's message. They are refused here, once, for every capability on every surface.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kody.errors import InvalidInput

ECHO_MAX = 200
MAX_DEPTH = 64
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def clipped(text: str, limit: int = ECHO_MAX) -> str:
    """At most ``limit`` characters of something the caller sent, marked when cut."""
    return text if len(text) <= limit else text[:limit] + f"… ({len(text) - limit} more)"


def check_text(value: Any) -> None:
    """Refuse input nested deeper than ``MAX_DEPTH`` or holding a string (key or value) with NUL
    or a lone surrogate. Iterative, so hostile nesting cannot exhaust the stack."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise InvalidInput(
                f"Input is nested more than {MAX_DEPTH} levels deep.",
                details={"errors": [{"path": clipped(path), "message": "nested too deeply"}]},
            )
        if isinstance(item, str):
            if _UNSTORABLE.search(item):
                raise _refused(path)
        elif isinstance(item, Mapping):
            for key, child in item.items():
                if isinstance(key, str) and _UNSTORABLE.search(key):
                    raise _refused(path)
                stack.append((child, f"{path}/{key}", depth + 1))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{path}/{i}", depth + 1) for i, child in enumerate(item))


def _refused(path: str) -> InvalidInput:
    message = "Text may not contain NUL characters or unpaired surrogates."
    return InvalidInput(
        message, details={"errors": [{"path": clipped(path or "/"), "message": message}]}
    )
