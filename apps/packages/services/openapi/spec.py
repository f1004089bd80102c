"""Fetching, parsing and validating an OpenAPI document someone handed us by URL.

The document comes through the SSRF-safe fetcher (public hosts only, on every redirect), is
capped in bytes, parsed as JSON or YAML (YAML aliases refused: they expand without bound),
checked for shape (nesting depth, node count) and for references: only local ``#/…``
references are allowed, because the validator would otherwise go and fetch the others itself,
past our fetcher. Then ``openapi-spec-validator`` validates it, and the operations are read
out into small, self-contained descriptions.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urljoin, urlsplit

import yaml
from jsonschema_path import SchemaPath
from openapi_spec_validator.shortcuts import get_validator_cls
from openapi_spec_validator.validation.exceptions import ValidatorDetectError

from kody.errors import InvalidInput, KodyError
from kody.fetch import FetchRefused, ResponseTooLarge, safe_get

MAX_SPEC_BYTES = 2 * 1024 * 1024
FETCH_TIMEOUT_SECONDS = 10.0
MAX_DEPTH = 64
MAX_NODES = 250_000
MAX_OPERATIONS = 1000
MAX_REPORTED_ERRORS = 5
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
# Methods that only read. Every other method (POST, PUT, PATCH, DELETE) may change something
# at the other end, so a binding carries it only when the person asked for destructive ones.
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})
# Dialect URIs the validator knows without fetching anything.
KNOWN_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://spec.openapis.org/oas/3.1/dialect/base",
        "https://spec.openapis.org/oas/3.1/dialect/2024-10-25",
        "http://json-schema.org/draft-07/schema#",
        "http://json-schema.org/draft-04/schema#",
    }
)
SLUG_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
ACCEPT = "application/json, application/yaml;q=0.9, text/yaml;q=0.9, */*;q=0.1"


class SpecFetchRefused(InvalidInput):
    code = "openapi_spec_fetch_refused"
    message = "The spec URL may not be fetched (it must be a public https address)."


class SpecFetchFailed(InvalidInput):
    code = "openapi_spec_fetch_failed"
    message = "The spec URL did not answer with a document."


class SpecTooLarge(KodyError):
    code = "openapi_spec_too_large"
    status = 413
    message = "The spec is larger than Kody accepts."


class SpecInvalid(InvalidInput):
    code = "openapi_spec_invalid"
    message = "The document is not a valid OpenAPI description."


class SpecUnsupported(InvalidInput):
    code = "openapi_spec_unsupported"
    message = "The document uses something Kody does not support."


@dataclass
class Spec:
    url: str
    openapi_version: str
    title: str
    version: str
    description: str
    base_url: str
    servers: list[str]
    tags: list[str]
    operations: list[dict[str, Any]] = field(default_factory=list)


def load(url: str) -> Spec:
    """Fetch, parse and validate the spec at ``url``; a coded 4xx for anything hostile."""
    return parse(fetch(url), url)


def fetch(url: str) -> bytes:
    try:
        fetched = safe_get(
            url, max_bytes=MAX_SPEC_BYTES, timeout=FETCH_TIMEOUT_SECONDS, accept=ACCEPT
        )
    except ResponseTooLarge:
        raise SpecTooLarge(details={"maxBytes": MAX_SPEC_BYTES}) from None
    except FetchRefused as exc:
        raise SpecFetchRefused(details={"reason": str(exc)[:300]}) from None
    if fetched.status != 200:
        raise SpecFetchFailed(
            f"The spec URL answered HTTP {fetched.status}.", details={"status": fetched.status}
        )
    return fetched.body


class _NoAliasLoader(yaml.SafeLoader):
    """Safe YAML without anchors and aliases, so a small document cannot expand into a huge one."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise SpecInvalid("YAML aliases are not accepted in a spec.")
        return super().compose_node(parent, index)


def decode(body: bytes) -> dict[str, Any]:
    try:
        text = body.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecInvalid("The spec is not UTF-8 text.") from None
    try:
        document = json.loads(text)
    except RecursionError:
        raise SpecInvalid("The spec is nested too deeply.") from None
    except ValueError:
        try:
            document = yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader
        except RecursionError:
            raise SpecInvalid("The spec is nested too deeply.") from None
        except yaml.YAMLError as exc:
            raise SpecInvalid(
                "The spec is neither JSON nor YAML.", details={"error": str(exc)[:300]}
            ) from None
    if not isinstance(document, dict):
        raise SpecInvalid("The spec must be a JSON or YAML object.")
    return document


def check_shape(document: dict[str, Any]) -> None:
    """Depth, size, string keys, and references that stay inside the document."""
    stack: list[tuple[Any, int]] = [(document, 0)]
    nodes = 0
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise SpecInvalid("The spec has too many elements.", details={"maxNodes": MAX_NODES})
        if depth > MAX_DEPTH:
            raise SpecInvalid("The spec is nested too deeply.", details={"maxDepth": MAX_DEPTH})
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str):
                    raise SpecInvalid("Every key in the spec must be a string.")
                _check_keyword(key, value)
                stack.append((value, depth + 1))
        elif isinstance(node, list):
            stack.extend((item, depth + 1) for item in node)
        elif not (node is None or isinstance(node, str | int | float | bool)):
            # YAML timestamps and the like: not JSON, so not part of an OpenAPI document.
            raise SpecInvalid("The spec holds a value that is not JSON.")


def _check_keyword(key: str, value: Any) -> None:
    if key in ("$ref", "$dynamicRef", "$recursiveRef"):
        if not isinstance(value, str) or not value.startswith("#"):
            raise SpecUnsupported(
                "Only references inside the document (#/…) are accepted.",
                details={"ref": str(value)[:300]},
            )
    elif key in ("$schema", "jsonSchemaDialect"):
        if isinstance(value, str) and value not in KNOWN_DIALECTS:
            raise SpecUnsupported(
                "The spec names a schema dialect Kody does not know.",
                details={"dialect": value[:300]},
            )
    elif key == "$id" and isinstance(value, str):
        raise SpecUnsupported("Schemas with their own $id are not accepted.")


def validate(document: dict[str, Any]) -> str:
    """The OpenAPI version, after openapi-spec-validator found no error."""
    raw = document.get("openapi")
    if "swagger" in document and raw is None:
        raise SpecUnsupported("Swagger 2.0 is not supported; use an OpenAPI 3.x document.")
    if not isinstance(raw, str) or not raw.startswith("3."):
        raise SpecInvalid("The document has no OpenAPI 3.x version (the `openapi` field).")
    try:
        validator_cls = get_validator_cls(document)
    except (ValidatorDetectError, KeyError, ValueError):
        raise SpecUnsupported(f"OpenAPI {raw[:20]} is not supported.") from None
    # No resolver handlers: every reference is local (checked above), nothing is retrieved.
    path = SchemaPath.from_dict(document, handlers={})
    problems: list[str] = []
    try:
        for error in validator_cls(path).iter_errors():
            problems.append(str(getattr(error, "message", error))[:300])
            if len(problems) >= MAX_REPORTED_ERRORS:
                break
    except RecursionError:
        raise SpecInvalid("The spec's references loop too deeply.") from None
    except Exception as exc:  # noqa: BLE001 - the validator's own failures mean a bad document
        raise SpecInvalid(details={"errors": [f"{type(exc).__name__}: {exc}"[:300]]}) from None
    if problems:
        raise SpecInvalid(details={"errors": problems})
    return raw


def parse(body: bytes, url: str) -> Spec:
    document = decode(body)
    check_shape(document)
    openapi_version = validate(document)
    info = document.get("info") or {}
    servers = [s for s in (_server_url(item, url) for item in document.get("servers") or []) if s]
    tags = [t["name"] for t in document.get("tags") or [] if isinstance(t.get("name"), str)]
    operations = read_operations(document)
    return Spec(
        url=url,
        openapi_version=openapi_version,
        title=str(info.get("title") or "")[:255],
        version=str(info.get("version") or "")[:64],
        description=str(info.get("description") or "")[:2000],
        base_url=servers[0] if servers else "",
        servers=servers[:10],
        tags=tags[:100],
        operations=operations,
    )


def _server_url(server: Any, spec_url: str) -> str:
    if not isinstance(server, dict) or not isinstance(server.get("url"), str):
        return ""
    url = server["url"]
    for name, variable in (server.get("variables") or {}).items():
        if isinstance(variable, dict) and isinstance(variable.get("default"), str):
            url = url.replace("{" + name + "}", variable["default"])
    url = urljoin(spec_url, url)
    return url.rstrip("/") if is_api_base_url(url) else ""


def is_api_base_url(url: str) -> bool:
    parts = urlsplit(url)
    return (
        parts.scheme in ("http", "https")
        and bool(parts.hostname)
        and not parts.username
        and not parts.password
        and "{" not in url
        and not parts.query
        and not parts.fragment
    )


def _resolve(document: dict[str, Any], node: Any) -> Any:
    """Follow local references a few hops (they were all checked to be ``#/…``)."""
    for _ in range(10):
        if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
            return node
        target: Any = document
        for part in node["$ref"][1:].split("/")[1:]:
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(target, dict) and part in target:
                target = target[part]
            elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
                target = target[int(part)]
            else:
                return {}
        node = target
    return {}


def _parameter(document: dict[str, Any], raw: Any) -> dict[str, Any] | None:
    param = _resolve(document, raw)
    if not isinstance(param, dict) or not isinstance(param.get("name"), str):
        return None
    schema = _resolve(document, param.get("schema") or {})
    kind = schema.get("type") if isinstance(schema, dict) else None
    return {
        "name": param["name"][:255],
        "in": str(param.get("in") or "query"),
        "required": bool(param.get("required")) or param.get("in") == "path",
        "type": kind if isinstance(kind, str) else "",
        "description": str(param.get("description") or "")[:500],
    }


def _slug(operation: dict[str, Any], method: str, path: str) -> str:
    operation_id = operation.get("operationId")
    if isinstance(operation_id, str) and SLUG_RE.match(operation_id):
        return operation_id
    base = operation_id if isinstance(operation_id, str) and operation_id else f"{method}_{path}"
    cleaned = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_.-]+", "_", base)).strip("_.-")[:128]
    return cleaned or method


def read_operations(document: dict[str, Any]) -> list[dict[str, Any]]:
    operations: list[dict[str, Any]] = []
    seen: set[str] = set()
    for path, raw_item in (document.get("paths") or {}).items():
        item = _resolve(document, raw_item)
        if not isinstance(item, dict):
            continue
        shared = [p for p in (_parameter(document, r) for r in item.get("parameters") or []) if p]
        for method in HTTP_METHODS:
            operation = item.get(method)
            if not isinstance(operation, dict):
                continue
            if len(operations) >= MAX_OPERATIONS:
                raise SpecUnsupported(
                    "The spec has more operations than Kody binds.",
                    details={"maxOperations": MAX_OPERATIONS},
                )
            own = [p for p in (_parameter(document, r) for r in operation.get("parameters") or [])]
            merged = {(p["name"], p["in"]): p for p in shared}
            merged.update({(p["name"], p["in"]): p for p in own if p})
            slug = _slug(operation, method, path)
            candidate, n = slug, 2
            while candidate in seen:
                candidate, n = f"{slug[:120]}_{n}", n + 1
            seen.add(candidate)
            body = _resolve(document, operation.get("requestBody"))
            verb = method.upper()
            tags = [t for t in operation.get("tags") or [] if isinstance(t, str)]
            operations.append(
                {
                    "slug": candidate,
                    "operationId": str(operation.get("operationId") or "")[:255],
                    "method": verb,
                    "path": path[:2000],
                    "summary": str(operation.get("summary") or "")[:500],
                    "description": str(operation.get("description") or "")[:1000],
                    "tags": tags[:20],
                    "destructive": verb not in READ_ONLY_METHODS,
                    "deprecated": bool(operation.get("deprecated")),
                    "parameters": list(merged.values())[:100],
                    "requestBody": (
                        {
                            "required": bool(body.get("required")),
                            "contentTypes": sorted(body.get("content") or {})[:10],
                        }
                        if isinstance(body, dict) and body
                        else None
                    ),
                }
            )
    return operations


def summary(spec: Spec) -> dict[str, Any]:
    return {
        "specUrl": spec.url,
        "openapiVersion": spec.openapi_version,
        "title": spec.title,
        "version": spec.version,
        "description": spec.description,
        "apiBaseUrl": spec.base_url,
        "servers": spec.servers,
        "tags": spec.tags,
        "operationCount": len(spec.operations),
        "destructiveCount": sum(1 for op in spec.operations if op["destructive"]),
        "operations": [
            {
                "slug": op["slug"],
                "method": op["method"],
                "path": op["path"],
                "summary": op["summary"],
                "tags": op["tags"],
                "destructive": op["destructive"],
            }
            for op in spec.operations
        ],
    }
