"""Every API error leaves as ``{"error": {"code", "message", "details"}}`` with a fitting status."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404
from rest_framework import exceptions
from rest_framework.response import Response
from rest_framework.views import exception_handler

from kody.errors import KodyError
from kody.outage import unavailable

logger = logging.getLogger(__name__)

# DRF's own exceptions, renamed to the codes our clients see.
_DRF_CODES = {
    exceptions.NotAuthenticated: "unauthenticated",
    exceptions.AuthenticationFailed: "unauthenticated",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.ParseError: "bad_request",
    exceptions.ValidationError: "invalid_input",
    exceptions.Throttled: "rate_limited",
}


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": details or {}}}


def error_response(exc: KodyError) -> Response:
    headers = {}
    retry_after = getattr(exc, "retry_after_seconds", None)
    if retry_after:
        headers["Retry-After"] = str(retry_after)
    return Response(error_body(exc.code, exc.message, exc.details), exc.status, headers=headers)


def handle_exception(exc: Exception, context: dict[str, Any]) -> Response | None:
    if isinstance(exc, KodyError):
        return error_response(exc)
    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body("payload_too_large", "The request body is too large.", {"limit": limit}),
            413,
        )
    response = exception_handler(exc, context)
    if response is None:
        down = unavailable(exc)
        if down is not None:
            logger.warning("API call refused: %s (%s)", down.code, type(exc).__name__)
            return error_response(down)
        logger.error("unhandled API error", exc_info=exc)
        return Response(error_body("internal_error", "Something went wrong on our side."), 500)
    api_exc = _as_api_exception(exc)
    if isinstance(api_exc, exceptions.ValidationError):
        response.status_code = 422
        response.data = error_body("invalid_input", "Invalid input.", {"errors": api_exc.detail})
        return response
    code = next((c for k, c in _DRF_CODES.items() if isinstance(api_exc, k)), api_exc.default_code)
    response.data = error_body(str(code), str(api_exc.detail))
    return response


def _as_api_exception(exc: Exception) -> exceptions.APIException:
    if isinstance(exc, Http404):
        return exceptions.NotFound()
    if isinstance(exc, PermissionDenied):
        return exceptions.PermissionDenied()
    assert isinstance(exc, exceptions.APIException)
    return exc
