"""Secret arguments, marked in the capability's own input schema.

A property whose schema says ``"x-kody-secret": true`` holds a secret value (``secretSet``'s
``value``, each ``value`` inside ``secretSetMany``'s ``secrets``). Anything that stores a call
for later — a job's target — must never keep one, so the mark is data the registry carries,
not a list of capability names somewhere else. A property marked ``"x-kody-target": true`` is
itself a stored call (``{"capability", "args"}``, e.g. ``jobSchedule``'s ``target``); the walk
follows it into that capability's own schema, so a job that schedules a job that sets a secret
is found too.

``secret_paths(capability, args)`` lists where ``args`` carries a secret (JSON pointers);
``redacted_call(call)`` is a stored call with every secret replaced by ``REDACTED``, for
showing rows written before the refusal existed.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

SECRET = "x-kody-secret"
TARGET = "x-kody-target"
REDACTED = "[redacted]"
# A stored call inside a stored call inside …: deeper than this is refused as if secret.
MAX_TARGET_DEPTH = 4


def secret_paths(capability: str, args: Any) -> list[str]:
    """JSON pointers (into ``args``) of every secret value a call of ``capability`` carries."""
    return sorted(_paths_in_call(capability, args, "", 0))


def redacted_call(call: Any) -> Any:
    """``{"capability", "args"}`` with each secret value replaced (other shapes as they are)."""
    if not isinstance(call, Mapping) or not isinstance(call.get("capability"), str):
        return call
    return {
        **call,
        "args": _redact(_schema_of(call["capability"]), call.get("args"), 0),
    }


def _schema_of(name: str) -> Mapping[str, Any]:
    from kody.capabilities.registry import get

    cap = get(name)
    return cap.input_schema if cap is not None else {}


def _paths_in_call(capability: str, args: Any, at: str, depth: int) -> Iterator[str]:
    if depth > MAX_TARGET_DEPTH:
        yield at or "/"
        return
    yield from _walk(_schema_of(capability), args, at, depth)


def _walk(schema: Any, data: Any, at: str, depth: int) -> Iterator[str]:
    if not isinstance(schema, Mapping):
        return
    if schema.get(SECRET) is True:
        yield at or "/"
        return
    if schema.get(TARGET) is True and isinstance(data, Mapping):
        name = data.get("capability")
        if isinstance(name, str):
            yield from _paths_in_call(name, data.get("args"), f"{at}/args", depth + 1)
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key) or ():
            yield from _walk(sub, data, at, depth)
    if isinstance(data, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        fallback = extra if isinstance(extra, Mapping) else None
        for name, value in data.items():
            yield from _walk(properties.get(name, fallback), value, f"{at}/{name}", depth)
    elif isinstance(data, list):
        items = schema.get("items")
        for index, value in enumerate(data):
            yield from _walk(items, value, f"{at}/{index}", depth)


def _redact(schema: Any, data: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping):
        return data
    if schema.get(SECRET) is True:
        return REDACTED
    if depth > MAX_TARGET_DEPTH:
        return REDACTED
    if schema.get(TARGET) is True and isinstance(data, Mapping):
        name = data.get("capability")
        if isinstance(name, str):
            return {**data, "args": _redact(_schema_of(name), data.get("args"), depth + 1)}
    for key in ("allOf", "anyOf", "oneOf"):
        for sub in schema.get(key) or ():
            data = _redact(sub, data, depth)
    if isinstance(data, Mapping):
        properties = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        fallback = extra if isinstance(extra, Mapping) else None
        return {
            name: _redact(properties.get(name, fallback), value, depth)
            for name, value in data.items()
        }
    if isinstance(data, list):
        return [_redact(schema.get("items"), value, depth) for value in data]
    return data
