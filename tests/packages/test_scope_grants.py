"""Platform accounts and package scope grants: operators provision a platform account and grant
people its scope; each write is audited intent-first; a user gets 403 and changes nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, User
from apps.accounts.services.tokens import create_token
from apps.packages.models import PackageScopeGrant
from tests.accounts import factories as f
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def operator_raw(operator) -> str:
    return create_token(operator, "operator laptop", enforce_rate_limit=False)[1]


@pytest.fixture
def owner_raw(owner) -> str:
    return create_token(owner, "owner laptop", enforce_rate_limit=False)[1]


@pytest.fixture
def platform() -> User:
    return f.UserFactory(username="acme-official", account_type="platform")


def audited(name: str) -> list[str]:
    return [
        a
        for a in AuditEvent.objects.order_by("pk").values_list("action", flat=True)
        if a in (name, f"{name}:intent")
    ]


def test_an_operator_creates_a_platform_account_with_a_reserved_name(operator_raw):
    created = call(
        operator_raw,
        "adminPlatformAccountCreate",
        {"email": "Team@Kody.Example", "username": "docs"},
    )
    assert created.status_code == 200, created.content
    body = created.json()
    assert body["user"]["accountType"] == "platform" and body["user"]["username"] == "docs"
    assert body["user"]["emailVerified"] is True
    assert body["setPasswordLink"].startswith("http")
    assert "password" not in body["user"]
    assert User.objects.get(username="docs").account_type == "platform"
    assert audited("adminPlatformAccountCreate") == [
        "adminPlatformAccountCreate:intent",
        "adminPlatformAccountCreate",
    ]


def test_a_platform_account_never_takes_a_system_mail_local(operator_raw):
    refused = call(
        operator_raw,
        "adminPlatformAccountCreate",
        {"email": "s@kody.example", "username": "support"},
    )
    assert refused.status_code in (409, 422), refused.content
    assert not User.objects.filter(username="support").exists()


def test_a_person_signup_still_cannot_take_a_reserved_name(operator_raw):
    refused = call(operator_raw, "adminUserCreate", {"email": "d@kody.example", "username": "docs"})
    assert refused.status_code in (409, 422)


def test_an_operator_grants_lists_and_revokes_a_scope(
    operator_raw, operator, owner, outsider, platform
):
    pair = {"scopeOwnerUserId": platform.stable_user_id, "granteeUserId": owner.stable_user_id}
    made = call(operator_raw, "adminPackageScopeGrantCreate", pair)
    assert made.status_code == 200, made.content
    assert made.json()["granteeUsername"] == owner.username
    assert made.json()["createdByUserId"] == operator.stable_user_id
    again = call(operator_raw, "adminPackageScopeGrantCreate", pair)
    assert again.status_code == 409 and again.json()["error"]["code"] == "scope_grant_exists"
    call(
        operator_raw,
        "adminPackageScopeGrantCreate",
        {"scopeOwnerUserId": platform.stable_user_id, "granteeUserId": outsider.stable_user_id},
    )

    first = call(operator_raw, "adminPackageScopeGrantList", {"limit": 1}).json()
    assert [g["granteeUserId"] for g in first["grants"]] == [owner.stable_user_id]
    rest = call(operator_raw, "adminPackageScopeGrantList", {"cursor": first["nextCursor"]}).json()
    assert [g["granteeUserId"] for g in rest["grants"]] == [outsider.stable_user_id]
    assert rest["nextCursor"] is None
    mine = call(operator_raw, "adminPackageScopeGrantList", {"granteeUserId": owner.stable_user_id})
    assert len(mine.json()["grants"]) == 1

    gone = call(operator_raw, "adminPackageScopeGrantRevoke", pair)
    assert gone.status_code == 200 and gone.json()["revoked"] is True
    assert not PackageScopeGrant.objects.filter(grantee_user_id=owner.stable_user_id).exists()
    missing = call(operator_raw, "adminPackageScopeGrantRevoke", pair)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "scope_grant_not_found"
    assert audited("adminPackageScopeGrantRevoke")[:2] == [
        "adminPackageScopeGrantRevoke:intent",
        "adminPackageScopeGrantRevoke",
    ]


def test_only_a_platform_account_owns_a_grantable_scope(operator_raw, owner, outsider, platform):
    person_scope = call(
        operator_raw,
        "adminPackageScopeGrantCreate",
        {"scopeOwnerUserId": outsider.stable_user_id, "granteeUserId": owner.stable_user_id},
    )
    assert person_scope.status_code == 422
    assert person_scope.json()["error"]["code"] == "scope_owner_not_platform"
    to_platform = call(
        operator_raw,
        "adminPackageScopeGrantCreate",
        {"scopeOwnerUserId": platform.stable_user_id, "granteeUserId": platform.stable_user_id},
    )
    assert to_platform.status_code == 422
    unknown = call(
        operator_raw,
        "adminPackageScopeGrantCreate",
        {"scopeOwnerUserId": platform.stable_user_id, "granteeUserId": "f" * 64},
    )
    assert unknown.status_code == 404
    assert not PackageScopeGrant.objects.exists()


@pytest.mark.parametrize(
    "name",
    [
        "adminPlatformAccountCreate",
        "adminPackageScopeGrantCreate",
        "adminPackageScopeGrantList",
        "adminPackageScopeGrantRevoke",
    ],
)
def test_a_user_gets_403_and_changes_nothing(owner_raw, owner, outsider, platform, name):
    PackageScopeGrant.objects.create(
        scope_owner_user_id=platform.stable_user_id,
        grantee_user_id=outsider.stable_user_id,
        created_by_user_id="operator",
    )
    payloads = {
        "adminPlatformAccountCreate": {"email": "x@kody.example", "username": "sneaky"},
        "adminPackageScopeGrantList": {},
    }
    pair = {"scopeOwnerUserId": platform.stable_user_id, "granteeUserId": owner.stable_user_id}
    response = call(owner_raw, name, payloads.get(name, pair))
    assert response.status_code == 403
    assert outsider.stable_user_id.encode() not in response.content
    assert PackageScopeGrant.objects.count() == 1
    assert not User.objects.filter(username="sneaky").exists()
    assert audited(name) == [name]
