"""Domain errors that every surface (DRF API, MCP, account UI, commands) renders the same way.

Services raise a ``KodyError`` subclass; the API turns it into
``{"error": {"code", "message", "details"}}`` with ``status`` as the HTTP status, and MCP turns
it into a tool result with ``isError`` set. Apps define their own subclasses next to their
services, for example::

    class LimitReached(KodyError):
        code = "limit_reached"
        status = 429

    raise LimitReached("Daily execute calls used up", details={"resource": "execute_calls"})
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class KodyError(Exception):
    code: str = "error"
    status: int = 400
    message: str = "The request could not be completed."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        self.message = message or type(self).message
        self.code = code or type(self).code
        self.status = status or type(self).status
        self.details: dict[str, Any] = dict(details or {})
        super().__init__(self.message)

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


class BadRequest(KodyError):
    code = "bad_request"
    status = 400
    message = "The request is malformed."


class Unauthenticated(KodyError):
    code = "unauthenticated"
    status = 401
    message = "A valid bearer token is required."


class Forbidden(KodyError):
    code = "forbidden"
    status = 403
    message = "You are not allowed to do this."


class NotFound(KodyError):
    code = "not_found"
    status = 404
    message = "Not found."


class Conflict(KodyError):
    code = "conflict"
    status = 409
    message = "The request conflicts with the current state."


class AccountDeleting(Conflict):
    code = "account_deleting"
    message = "This account is being deleted; changes are no longer accepted."


class InvalidInput(KodyError):
    code = "invalid_input"
    status = 422
    message = "The input does not match the expected schema."


class RateLimited(KodyError):
    code = "rate_limited"
    status = 429
    message = "Too many requests; try again later."
