"""OpenAPI capabilities: bind a spec's operations (domain ``openapi``), and summarize a spec or
scaffold a client package from a binding (domain ``integrations``)."""

from __future__ import annotations

from typing import Any

from apps.packages.services.openapi import bindings, scaffold, spec
from kody.capabilities import Context, capability

NAME = {"type": "string", "minLength": 1, "maxLength": 100, "pattern": r"^[A-Za-z0-9_.-]+$"}
SPEC_URL = {
    "type": "string",
    "minLength": 9,
    "maxLength": 2000,
    "pattern": r"^https://",
    "description": "Where the OpenAPI 3.x document (JSON or YAML) is served; public https only.",
}
SECRET_NAME = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": r"^[A-Za-z0-9_.:-]+$"}
AUTH = {
    "type": "object",
    "description": (
        "How calls authenticate: the NAME of a secret you saved (never its value). bearer sends "
        "`Authorization: Bearer …`, header sends it in the header `name`, query in the query "
        "parameter `name`."
    ),
    "properties": {
        "type": {"type": "string", "enum": list(bindings.AUTH_TYPES)},
        "secretName": SECRET_NAME,
        "name": {
            "type": "string",
            "minLength": 1,
            "maxLength": 100,
            "pattern": r"^[A-Za-z0-9_-]+$",
        },
    },
    "required": ["type"],
    "additionalProperties": False,
}
BY_NAME = {
    "type": "object",
    "properties": {"name": NAME},
    "required": ["name"],
    "additionalProperties": False,
}


@capability(
    name="openapiBindingSave",
    domain="openapi",
    mutates=True,
    title="Bind an OpenAPI spec",
    description=(
        "Fetch and validate an OpenAPI 3.x spec and bind it under a name: its API base URL "
        "(the spec's first server unless apiBaseUrl is given), how calls authenticate (a secret "
        "name), and the selected operations (by operationId or slug, or by tag; all by default). "
        "Operations that may change data (POST, PUT, PATCH, DELETE) are bound only with "
        "includeDestructive. Saving an existing name replaces it. Nothing is written when the "
        "spec is refused (openapi_spec_fetch_refused, openapi_spec_too_large, "
        "openapi_spec_invalid, openapi_spec_unsupported)."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "name": NAME,
            "specUrl": SPEC_URL,
            "apiBaseUrl": {"type": "string", "minLength": 8, "maxLength": 2000},
            "description": {"type": "string", "maxLength": 2000},
            "auth": AUTH,
            "operations": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 255},
                "maxItems": 1000,
            },
            "tags": {
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 255},
                "maxItems": 100,
            },
            "includeDestructive": {"type": "boolean"},
        },
        "required": ["name", "specUrl"],
        "additionalProperties": False,
    },
)
def openapi_binding_save(
    ctx: Context,
    name: str,
    specUrl: str,  # noqa: N803
    apiBaseUrl: str | None = None,  # noqa: N803
    description: str = "",
    auth: dict[str, Any] | None = None,
    operations: list[str] | None = None,
    tags: list[str] | None = None,
    includeDestructive: bool = False,  # noqa: N803
) -> dict[str, Any]:
    return bindings.save(
        ctx.user_id,
        name=name,
        spec_url=specUrl,
        api_base_url=apiBaseUrl,
        description=description,
        auth=auth,
        operations=operations,
        tags=tags,
        include_destructive=includeDestructive,
    )


@capability(
    name="openapiBindingGet",
    domain="openapi",
    title="Read an OpenAPI binding",
    description="One of your OpenAPI bindings with its bound operations.",
    input_schema=BY_NAME,
)
def openapi_binding_get(ctx: Context, name: str) -> dict[str, Any]:
    return bindings.get(ctx.user_id, name)


@capability(
    name="openapiBindingList",
    domain="openapi",
    title="List OpenAPI bindings",
    description="Your OpenAPI bindings by name, with how many operations each binds.",
)
def openapi_binding_list(ctx: Context) -> dict[str, Any]:
    return {"bindings": bindings.listing(ctx.user_id)}


@capability(
    name="openapiBindingDelete",
    domain="openapi",
    mutates=True,
    title="Delete an OpenAPI binding",
    description="Delete an OpenAPI binding and its operations (secrets it names are kept).",
    input_schema=BY_NAME,
)
def openapi_binding_delete(ctx: Context, name: str) -> dict[str, Any]:
    return bindings.delete(ctx.user_id, name)


@capability(
    name="openapiBindingRefresh",
    domain="openapi",
    mutates=True,
    title="Refresh an OpenAPI binding",
    description=(
        "Fetch the binding's spec again and reconcile its operations with the saved selection "
        "in one step: new matches are added, changed ones updated, vanished ones removed. "
        "Answers the counts; a refused spec changes nothing."
    ),
    input_schema=BY_NAME,
)
def openapi_binding_refresh(ctx: Context, name: str) -> dict[str, Any]:
    return bindings.refresh(ctx.user_id, name)


@capability(
    name="openapiSpecSummarize",
    domain="integrations",
    title="Summarize an OpenAPI spec",
    description=(
        "Fetch and validate an OpenAPI 3.x spec without saving anything: title, version, "
        "servers, tags and every operation (method, path, summary, whether it may change data)."
    ),
    input_schema={
        "type": "object",
        "properties": {"specUrl": SPEC_URL},
        "required": ["specUrl"],
        "additionalProperties": False,
    },
)
def openapi_spec_summarize(ctx: Context, specUrl: str) -> dict[str, Any]:  # noqa: N803
    return spec.summary(spec.load(specUrl))


@capability(
    name="openapiClientScaffold",
    domain="integrations",
    title="Scaffold a client package",
    description=(
        "Write a package skeleton (package.json, README.md, mod.ts) with one function per "
        "operation of an OpenAPI binding, each calling the API through the runtime's fetch "
        "with the binding's secret as a {{secret:name}} placeholder. Nothing is saved: pass "
        "the files to packageSave to publish them."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "bindingName": NAME,
            "packageName": {
                "type": "string",
                "minLength": 1,
                "maxLength": 100,
                "pattern": r"^[a-z0-9][a-z0-9._-]*$",
                "description": "The package's short name (default: <binding>-client).",
            },
        },
        "required": ["bindingName"],
        "additionalProperties": False,
    },
)
def openapi_client_scaffold(
    ctx: Context,
    bindingName: str,  # noqa: N803
    packageName: str | None = None,  # noqa: N803
) -> dict[str, Any]:
    return scaffold.scaffold(ctx.user_id, ctx.user.username, bindingName, packageName)  # type: ignore[union-attr]
