"""OpenAPI post-processing: what drf-spectacular cannot infer from a capability's raw schema.

A request body given as a plain JSON Schema is documented as optional; a capability whose input
refuses ``{}`` (required fields, a ``oneOf`` of them) refuses an absent body too, so its body is
marked required.
"""

from __future__ import annotations

from typing import Any

from jsonschema import Draft202012Validator


def mark_required_bodies(result: dict[str, Any], **_: Any) -> dict[str, Any]:
    for operations in result.get("paths", {}).values():
        for operation in operations.values():
            body = operation.get("requestBody") if isinstance(operation, dict) else None
            if not body:
                continue
            schemas = [media.get("schema") or {} for media in body.get("content", {}).values()]
            if any(not Draft202012Validator(schema).is_valid({}) for schema in schemas):
                body["required"] = True
    return result
