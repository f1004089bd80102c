"""Operator capabilities over accounts and the audit log: an operator succeeds and is audited
(audit-first for writes), a user gets 403 and learns nothing, and replies stay content-free."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, Plan, User
from apps.accounts.models.users import stable_user_id_for
from apps.accounts.services import audit
from apps.accounts.services.tokens import create_token
from kody.capabilities import all_capabilities
from tests.accounts import factories as f
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

CAPABILITIES = {
    "adminUserCreate",
    "adminUserGet",
    "adminUserList",
    "adminUserUpdate",
    "adminUserStableIdConflict",
    "adminAuditLogQuery",
}
FORBIDDEN_KEYS = {"password", "passwordHash", "token", "bio", "displayName", "emailHash"}


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def operator_raw(operator) -> str:
    return create_token(operator, "operator laptop")[1]


@pytest.fixture
def owner_raw(owner) -> str:
    return create_token(owner, "owner laptop")[1]


def _audited(name: str) -> list[str]:
    return [
        a
        for a in AuditEvent.objects.order_by("pk").values_list("action", flat=True)
        if a in (name, f"{name}:intent")
    ]


def _keys(value: object) -> set[str]:
    if isinstance(value, dict):
        return set(value) | {k for v in value.values() for k in _keys(v)}
    if isinstance(value, list):
        return {k for v in value for k in _keys(v)}
    return set()


def test_every_capability_here_is_an_operator_one():
    declared = {
        c.name
        for c in all_capabilities()
        if c.handler.__module__ == "apps.accounts.admin_user_capabilities"
    }
    assert declared == CAPABILITIES
    assert {c.role for c in all_capabilities() if c.name in declared} == {"admin"}


def test_operator_creates_an_account_on_a_plan_audit_first(operator_raw):
    response = call(
        operator_raw,
        "adminUserCreate",
        {"email": "Newbie@Example.com", "username": "newbie", "plan": "pro"},
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["user"]["plan"] == "pro" and body["user"]["emailVerified"] is True
    assert body["setPasswordLink"].startswith("http")
    user = User.objects.get(username="newbie")
    assert user.plan == Plan.PRO and user.stable_user_id == stable_user_id_for("newbie@example.com")
    assert _audited("adminUserCreate") == ["adminUserCreate:intent", "adminUserCreate"]
    assert not FORBIDDEN_KEYS & _keys(body)


def test_a_taken_username_is_a_coded_conflict_and_creates_nothing(operator_raw, owner):
    response = call(
        operator_raw, "adminUserCreate", {"email": "fresh@example.com", "username": owner.username}
    )
    assert 400 <= response.status_code < 500
    assert not User.objects.filter(email="fresh@example.com").exists()


def test_operator_reads_and_pages_accounts(operator_raw, owner, outsider):
    got = call(operator_raw, "adminUserGet", {"userId": owner.stable_user_id}).json()
    assert got["userId"] == owner.stable_user_id and got["username"] == owner.username
    assert not FORBIDDEN_KEYS & _keys(got)

    seen: list[str] = []
    cursor = None
    while True:
        payload = {"limit": 1, **({"cursor": cursor} if cursor else {})}
        page = call(operator_raw, "adminUserList", payload).json()
        seen += [u["userId"] for u in page["users"]]
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == User.objects.count()
    only = call(operator_raw, "adminUserList", {"query": owner.username}).json()["users"]
    assert [u["userId"] for u in only] == [owner.stable_user_id]
    assert "adminUserList" in _audited("adminUserList")
    assert call(operator_raw, "adminUserList", {"cursor": "garbage"}).status_code == 422


def test_operator_changes_plan_and_suspension_audit_first(operator_raw, outsider):
    response = call(
        operator_raw,
        "adminUserUpdate",
        {"userId": outsider.stable_user_id, "plan": "max", "suspended": True},
    )
    assert response.status_code == 200, response.content
    outsider.refresh_from_db()
    assert outsider.plan == Plan.MAX and outsider.suspended_at is not None
    assert response.json()["suspended"] is True
    assert _audited("adminUserUpdate") == ["adminUserUpdate:intent", "adminUserUpdate"]

    from apps.entitlements.services import cached_plan

    assert cached_plan(outsider.stable_user_id) == "max"

    call(operator_raw, "adminUserUpdate", {"userId": outsider.stable_user_id, "suspended": False})
    outsider.refresh_from_db()
    assert outsider.suspended_at is None and outsider.plan == Plan.MAX


def test_stable_id_conflict_returns_only_identity_and_verified_state(operator_raw, owner):
    body = call(operator_raw, "adminUserStableIdConflict", {"email": owner.email.upper()}).json()
    assert body["stableUserId"] == owner.stable_user_id
    assert set(body["holder"]) == {"id", "username", "createdAt", "emailVerified"}
    assert body["holder"]["id"] == owner.stable_user_id
    assert owner.email not in str(body)
    empty = call(operator_raw, "adminUserStableIdConflict", {"email": "nobody@example.com"})
    assert empty.json()["holder"] is None


def test_audit_log_query_filters_and_pages_by_keyset(operator_raw, frozen_clock):
    now = timezone.now()
    for n in range(5):
        f.AuditEventFactory(
            category="auth",
            action="login",
            result="failure",
            email_hash=audit.email_hash("target@example.com"),
            timestamp=now - timedelta(minutes=n),
        )
    f.AuditEventFactory(category="auth", action="login", result="success", timestamp=now)
    f.AuditEventFactory(
        category="auth", action="login", result="failure", timestamp=now - timedelta(days=2)
    )

    filters = {
        "category": "auth",
        "result": "failure",
        "email": "target@example.com",
        "since": (now - timedelta(hours=1)).isoformat(),
        "limit": 2,
    }
    stamps: list[str] = []
    cursor = None
    while True:
        page = call(operator_raw, "adminAuditLogQuery", {**filters, "cursor": cursor}).json()
        stamps += [e["timestamp"] for e in page["events"]]
        assert not FORBIDDEN_KEYS & _keys(page) and "target@example.com" not in str(page)
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert len(stamps) == 5 and stamps == sorted(stamps, reverse=True)
    bad = call(operator_raw, "adminAuditLogQuery", {"since": "yesterday"})
    assert bad.status_code == 422


@pytest.mark.parametrize("name", sorted(CAPABILITIES))
def test_a_user_gets_403_and_changes_nothing(name, owner_raw, outsider):
    payload = {
        "adminUserCreate": {"email": "sneaky@example.com", "username": "sneaky"},
        "adminUserGet": {"userId": outsider.stable_user_id},
        "adminUserList": {},
        "adminUserUpdate": {"userId": outsider.stable_user_id, "plan": "max"},
        "adminUserStableIdConflict": {"email": outsider.email},
        "adminAuditLogQuery": {},
    }[name]
    response = call(owner_raw, name, payload)
    assert response.status_code == 403
    text = response.content.decode()
    assert outsider.username not in text and outsider.stable_user_id not in text
    outsider.refresh_from_db()
    assert outsider.plan == Plan.FREE
    assert not User.objects.filter(username="sneaky").exists()
    assert not any(a.endswith(":intent") for a in _audited(name))
