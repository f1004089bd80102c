"""The capability registry over HTTP: list, call by name, and per-capability routes.

Each registered capability gets ``POST /api/v1/capabilities/<name>`` with its own request and
response schema in the OpenAPI document, plus its REST alias when it declares one. A catch-all
route answers names registered later (and unknown names, with 404 ``unknown_capability``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.settings import api_settings
from rest_framework.views import APIView

from kody.api.authentication import BearerTokenAuthentication
from kody.api.exceptions import handle_exception
from kody.capabilities import Capability, Context, all_capabilities, invoke, visible_to
from kody.errors import InvalidInput

ANY_OBJECT = {"type": "object", "additionalProperties": True}


class ErrorDetailSerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable, e.g. invalid_input.")
    message = serializers.CharField()
    details = serializers.DictField()


class ErrorSerializer(serializers.Serializer):
    error = ErrorDetailSerializer()


ERRORS = {
    status: OpenApiResponse(ErrorSerializer, description=text)
    for status, text in {
        400: "Malformed request (bad_request).",
        401: "Missing, invalid, revoked or expired token (unauthenticated).",
        403: "Role or token scope does not allow this (forbidden, insufficient_scope).",
        404: "Unknown capability or object (unknown_capability, not_found, ...).",
        409: "Conflicts with current state (account_deleting, ...).",
        413: "The request body is over the size limit (payload_too_large).",
        422: "Input does not match the capability's schema (invalid_input).",
        429: "Rate or plan limit reached (rate_limited, limit_reached).",
        503: "Briefly unavailable (actor_unavailable); retry after Retry-After seconds.",
    }.items()
}

CAPABILITY_LIST = {
    "type": "object",
    "properties": {
        "capabilities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "domain": {"type": "string"},
                    "title": {"type": "string"},
                    "description": {"type": "string"},
                    "role": {"type": "string", "enum": ["user", "admin"]},
                    "mutates": {"type": "boolean"},
                    "inputSchema": ANY_OBJECT,
                    "outputSchema": {"type": ["object", "null"]},
                },
            },
        }
    },
}


class BoundedJSONParser(JSONParser):
    """JSON whose nesting would exhaust the parser's stack is a 400, like any malformed body."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError as exc:
            raise ParseError("JSON parse error - nested too deeply.") from exc


# Query parameters DRF itself reads (format suffix); they are never capability input.
DRF_QUERY_PARAMS = frozenset({api_settings.URL_FORMAT_OVERRIDE})


INDEX = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "version": {"type": "string"},
        "authenticated": {"type": "boolean"},
        "links": {"type": "object", "additionalProperties": {"type": "string"}},
        "capabilities": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "title": {"type": "string"},
                    "path": {"type": "string"},
                },
            },
        },
    },
    "required": ["name", "version", "authenticated", "links", "capabilities"],
}


class CapabilityAPIView(APIView):
    authentication_classes = [BearerTokenAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]

    def get_exception_handler(self) -> Callable[..., Response | None]:
        return handle_exception

    def caller(self, request: Request) -> Context:
        return Context(
            user=request.user, token=request.auth, surface="api", ip=request.META.get("REMOTE_ADDR")
        )

    def call(self, request: Request, name: str, arguments: Any) -> Response:
        if not isinstance(arguments, dict):
            raise InvalidInput("The request body must be a JSON object.")
        return Response(invoke(name, self.caller(request), arguments))


def describe(cap: Capability) -> dict[str, Any]:
    return {
        "name": cap.name,
        "domain": cap.domain,
        "title": cap.title or cap.name,
        "description": cap.description,
        "role": cap.role,
        "mutates": cap.mutates,
        "inputSchema": dict(cap.input_schema),
        "outputSchema": dict(cap.output_schema) if cap.output_schema is not None else None,
    }


class CapabilityListView(CapabilityAPIView):
    @extend_schema(
        operation_id="capabilityList",
        summary="List the capabilities this token may call",
        tags=["capabilities"],
        responses={200: OpenApiResponse(CAPABILITY_LIST), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        return Response({"capabilities": [describe(c) for c in visible_to(self.caller(request))]})


class IndexView(CapabilityAPIView):
    """``GET /api/v1/``: where to go next. Open to all; with a token it lists what it may call."""

    permission_classes = [AllowAny]

    @extend_schema(
        operation_id="apiIndex",
        summary="The API's entry point: capabilities and links to the schema and docs",
        tags=["capabilities"],
        responses={200: OpenApiResponse(INDEX), **ERRORS},
    )
    def get(self, request: Request) -> Response:
        if request.user.is_authenticated:
            caps = visible_to(self.caller(request))
        else:
            caps = [cap for cap in all_capabilities() if cap.role == "user"]
        return Response(
            {
                "name": "Kody API",
                "version": "v1",
                "authenticated": bool(request.user.is_authenticated),
                "links": {
                    "capabilities": reverse("api-capabilities", request=request),
                    "schema": reverse("api-schema", request=request),
                    "docs": reverse("api-docs", request=request),
                    "mcp": request.build_absolute_uri("/mcp"),
                },
                "capabilities": [
                    {"name": cap.name, "title": cap.title or cap.name, "path": _path_of(cap)}
                    for cap in caps
                ],
            }
        )


def _path_of(cap: Capability) -> str:
    if cap.rest is not None:
        return f"{cap.rest.method} /api/v1/{cap.rest.path}"
    return f"POST /api/v1/capabilities/{cap.name}"


class CapabilityCallView(CapabilityAPIView):
    @extend_schema(exclude=True)
    def post(self, request: Request, name: str) -> Response:
        return self.call(request, name, request.data)


def call_view(cap: Capability) -> Callable[..., Any]:
    """``POST /capabilities/<name>``: the body is the capability's input object."""

    def post(self: CapabilityAPIView, request: Request) -> Response:
        return self.call(request, cap.name, request.data)

    documented = _document(cap, f"{cap.name}Call", request_schema=cap.input_schema)(post)
    view = type(f"{cap.name}CallView", (CapabilityAPIView,), {"post": documented})
    return cast(type[CapabilityAPIView], view).as_view()


def alias_view(cap: Capability) -> Callable[..., Any]:
    """The capability's REST alias; a GET alias takes its input from the query string."""
    assert cap.rest is not None
    method = cap.rest.method.lower()

    def handler(self: CapabilityAPIView, request: Request) -> Response:
        arguments = request.data
        if method == "get":
            query = request.query_params.dict()
            arguments = {k: v for k, v in query.items() if k not in DRF_QUERY_PARAMS}
        return self.call(request, cap.name, arguments)

    request_schema = cap.input_schema if method == "post" else None
    documented = _document(cap, cap.name, request_schema=request_schema)(handler)
    view = type(f"{cap.name}AliasView", (CapabilityAPIView,), {method: documented})
    return cast(type[CapabilityAPIView], view).as_view()


def _document(cap: Capability, operation_id: str, request_schema: Any) -> Callable[..., Any]:
    output = dict(cap.output_schema) if cap.output_schema is not None else ANY_OBJECT
    return extend_schema(
        operation_id=operation_id,
        summary=cap.title or cap.name,
        description=cap.description + (" Operators only; audited." if cap.role == "admin" else ""),
        tags=[cap.domain],
        request={"application/json": dict(request_schema)} if request_schema is not None else None,
        responses={200: OpenApiResponse(output), **ERRORS},
    )
