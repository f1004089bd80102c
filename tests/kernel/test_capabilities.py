from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.utils import timezone

from apps.accounts.models import AccessToken, AuditEvent, User
from kody.capabilities import (
    Capability,
    Context,
    InsufficientScope,
    UnknownCapability,
    all_capabilities,
    capability,
    get,
    invoke,
    register,
    unregister,
    visible_to,
)
from kody.errors import AccountDeleting, Forbidden, InvalidInput, KodyError

# A mutating capability holds a write lease in the caller's UserMeter: actors run inline.
pytestmark = [
    pytest.mark.django_db(databases=["default", "audit"]),
    pytest.mark.usefixtures("inline_actors"),
]


class LimitReached(KodyError):
    code = "limit_reached"
    status = 429


ECHO_INPUT = {
    "type": "object",
    "properties": {"text": {"type": "string", "maxLength": 5}, "count": {"type": "integer"}},
    "required": ["text"],
    "additionalProperties": False,
}


@pytest.fixture
def throwaway() -> Iterator[None]:
    """Capabilities that exist only for these tests."""

    @capability(name="testEcho", domain="test", description="Echo.", input_schema=ECHO_INPUT)
    def echo(ctx: Context, text: str, count: int = 1) -> dict[str, Any]:
        return {"text": text * count, "userId": ctx.user_id}

    @capability(name="testWrite", domain="test", description="Write.", mutates=True)
    def write(ctx: Context) -> dict[str, Any]:
        return {"written": True}

    @capability(name="testAdmin", domain="test", description="Operators.", role="admin")
    def admin(ctx: Context) -> dict[str, Any]:
        return {"ok": True}

    @capability(name="testLimit", domain="test", description="Always over the limit.")
    def limit(ctx: Context) -> dict[str, Any]:
        raise LimitReached("Daily limit reached.", details={"resource": "execute_calls"})

    yield
    for name in ("testEcho", "testWrite", "testAdmin", "testLimit"):
        unregister(name)


def test_apps_capabilities_are_autodiscovered() -> None:
    names = {cap.name for cap in all_capabilities()}
    assert {"whoami", "accessTokenList", "accessTokenRevoke"} <= names
    assert get("whoami").domain == "account"


def test_a_name_registers_once(throwaway: None) -> None:
    with pytest.raises(ImproperlyConfigured):
        register(Capability(name="testEcho", domain="t", description="d", handler=print))


@pytest.mark.parametrize("name", ["snake_case", "Capitalized", "with-dash", ""])
def test_names_are_camel_case(name: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        Capability(name=name, domain="t", description="d", handler=print)


def test_input_schema_must_be_a_valid_object_schema() -> None:
    with pytest.raises(ImproperlyConfigured):
        Capability(
            name="x", domain="t", description="d", handler=print, input_schema={"type": "array"}
        )
    with pytest.raises(ImproperlyConfigured):
        Capability(
            name="x",
            domain="t",
            description="d",
            handler=print,
            input_schema={"type": "object", "properties": {"a": {"type": "nope"}}},
        )


def test_input_is_validated_before_the_handler_runs(throwaway: None, owner: User) -> None:
    ctx = Context(user=owner)
    assert invoke("testEcho", ctx, {"text": "ab", "count": 2}) == {
        "text": "abab",
        "userId": owner.stable_user_id,
    }
    with pytest.raises(InvalidInput) as caught:
        invoke("testEcho", ctx, {"text": "too long", "count": "2", "extra": 1})

    error = caught.value
    assert error.status == 422 and error.code == "invalid_input"
    paths = {e["path"] for e in error.details["errors"]}
    assert {"/text", "/count", "/"} <= paths


@pytest.mark.parametrize("arguments", [[1, 2], "text", 3])
def test_input_must_be_an_object(throwaway: None, owner: User, arguments: Any) -> None:
    with pytest.raises(InvalidInput):
        invoke("testEcho", Context(user=owner), arguments)


def test_missing_input_counts_as_empty(throwaway: None, owner: User) -> None:
    assert invoke("testWrite", Context(user=owner), None) == {"written": True}


def test_unknown_capability(owner: User) -> None:
    with pytest.raises(UnknownCapability) as caught:
        invoke("noSuchThing", Context(user=owner), {})
    assert caught.value.status == 404


def test_domain_errors_keep_their_code_and_status(throwaway: None, owner: User) -> None:
    with pytest.raises(LimitReached) as caught:
        invoke("testLimit", Context(user=owner), {})
    assert caught.value.as_dict() == {
        "code": "limit_reached",
        "message": "Daily limit reached.",
        "details": {"resource": "execute_calls"},
    }
    assert caught.value.status == 429


def test_deleting_account_may_read_but_not_mutate(throwaway: None, owner: User) -> None:
    ctx = Context(user=owner)
    User.objects.filter(pk=owner.pk).update(deleting_at=timezone.now())

    assert invoke("testEcho", ctx, {"text": "hi"})["text"] == "hi"
    with pytest.raises(AccountDeleting) as caught:
        invoke("testWrite", ctx, {})
    assert (caught.value.status, caught.value.code) == (409, "account_deleting")


def test_admin_capability_refuses_users_and_audits_the_attempt(
    throwaway: None, owner: User
) -> None:
    with pytest.raises(Forbidden) as caught:
        invoke("testAdmin", Context(user=owner, ip="198.51.100.7"), {})

    assert caught.value.status == 403
    row = AuditEvent.objects.get()
    assert (row.category, row.action, row.result, row.reason) == (
        "admin",
        "testAdmin",
        "failure",
        "forbidden",
    )
    assert row.email_hash and owner.email not in (row.email_hash or "")


def test_admin_capability_serves_operators_and_audits(throwaway: None, operator: User) -> None:
    assert invoke("testAdmin", Context(user=operator, surface="mcp"), {}) == {"ok": True}
    row = AuditEvent.objects.get()
    assert (row.category, row.action, row.result, row.path) == (
        "admin",
        "testAdmin",
        "success",
        "mcp:testAdmin",
    )


def test_user_capabilities_are_not_audited(throwaway: None, owner: User) -> None:
    invoke("testEcho", Context(user=owner), {"text": "a"})
    assert not AuditEvent.objects.exists()


def test_visible_to_hides_admin_capabilities_from_users(
    throwaway: None, owner: User, operator: User
) -> None:
    assert "testAdmin" not in {c.name for c in visible_to(Context(user=owner))}
    assert "testAdmin" in {c.name for c in visible_to(Context(user=operator))}


def test_token_scopes_limit_capabilities(throwaway: None, owner: User) -> None:
    narrow = AccessToken(user=owner, kind="oauth", client_id="client-1", scopes=["account"])
    ctx = Context(user=owner, token=narrow)

    assert invoke("whoami", ctx, {})["userId"] == owner.stable_user_id
    with pytest.raises(InsufficientScope) as caught:
        invoke("testEcho", ctx, {"text": "a"})
    assert (caught.value.status, caught.value.code) == (403, "insufficient_scope")
    assert "testEcho" not in {c.name for c in visible_to(ctx)}
