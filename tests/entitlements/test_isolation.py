"""No capability or page of entitlements lets one person read or change another's meter."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent
from apps.accounts.services.tokens import create_token
from apps.entitlements import services
from kody.capabilities import all_capabilities

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# Every entitlements capability needs a cross-user test here; a new one fails this list.
COVERED = {
    "accountUsage",
    "adminUserUsage",
    "adminUserMeterParity",
    "adminUserMeterStorageReconcile",
}
ADMIN_CAPABILITIES = sorted(COVERED - {"accountUsage"})


def bearer(raw: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def owner_token(owner) -> str:
    return create_token(owner, "owner laptop")[1]


@pytest.fixture
def operator_token(operator) -> str:
    return create_token(operator, "operator laptop")[1]


def test_every_entitlements_capability_has_an_isolation_test():
    declared = {
        c.name
        for c in all_capabilities()
        if c.handler.__module__ == "apps.entitlements.capabilities"
    }
    assert declared == COVERED


def test_account_usage_is_the_callers_own(owner, outsider, owner_token):
    services.consume(outsider, "execute_calls_per_day", 9)
    services.consume(owner, "execute_calls_per_day", 2)
    data = call(owner_token, "accountUsage").json()
    used = {row["resource"]: row["used"] for row in data["resources"]}
    assert used["execute_calls_per_day"] == 2
    rest = APIClient().get("/api/v1/account/usage", **bearer(owner_token))
    assert rest.status_code == 200 and rest.json()["plan"] == "free"


def test_account_usage_refuses_to_name_another_user(outsider, owner_token):
    response = call(owner_token, "accountUsage", {"userId": outsider.stable_user_id})
    assert response.status_code == 422


def test_a_limit_error_reaches_the_api_as_a_coded_429(owner, owner_token):
    from kody.capabilities import Context, capability, unregister

    @capability(name="zzLimitProbe", domain="account", description="test probe")
    def probe(ctx: Context) -> dict:
        services.consume(ctx.user, "email_sends_per_day", 11)
        return {}

    try:
        response = call(owner_token, "zzLimitProbe")
    finally:
        unregister("zzLimitProbe")
    assert response.status_code == 429
    error = response.json()["error"]
    assert error["code"] == "limit_reached"
    assert {"resource", "limit", "plan", "resets_at"} <= set(error["details"])


@pytest.mark.parametrize("name", ADMIN_CAPABILITIES)
def test_a_user_cannot_call_operator_meter_capabilities(name, outsider, owner_token):
    services.consume(outsider, "execute_calls_per_day", 3)
    response = call(owner_token, name, {"userId": outsider.stable_user_id})
    assert response.status_code == 403
    assert "execute_calls_per_day" not in response.content.decode()


def test_operator_parity_shows_meter_only_counts_and_is_audited(outsider, operator_token):
    services.consume(outsider, "execute_calls_per_day", 3)
    data = call(operator_token, "adminUserMeterParity", {"userId": outsider.stable_user_id}).json()
    assert data["source"] == "user_meter"
    assert [(r["resource"], r["count"]) for r in data["dailyCounters"]] == [
        ("execute_calls_per_day", 3)
    ]
    assert AuditEvent.objects.using("audit").filter(action="adminUserMeterParity").exists()


def test_operator_usage_and_reconcile_for_one_user(outsider, operator_token):
    services.consume(outsider, "job_runs_per_day", 2)
    usage = call(operator_token, "adminUserUsage", {"userId": outsider.stable_user_id}).json()
    assert usage["userId"] == outsider.stable_user_id
    assert {r["resource"]: r["used"] for r in usage["resources"]}["job_runs_per_day"] == 2
    reconciled = call(
        operator_token, "adminUserMeterStorageReconcile", {"userId": outsider.stable_user_id}
    )
    assert reconciled.status_code == 200 and reconciled.json()["bytes"] >= 0


def test_operator_capabilities_answer_404_for_an_unknown_user(operator_token):
    response = call(operator_token, "adminUserMeterParity", {"userId": "f" * 64})
    assert response.status_code == 404


def test_admin_usage_page_is_for_staff_only(client, owner, outsider):
    client.force_login(owner)
    response = client.get(f"/admin/entitlements/usagerollup/user/?q={outsider.stable_user_id}")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_admin_usage_page_shows_one_user_and_is_audited(client, operator, outsider):
    services.consume(outsider, "execute_calls_per_day", 4)
    client.force_login(operator)
    response = client.get(f"/admin/entitlements/usagerollup/user/?q={outsider.username}")
    assert response.status_code == 200
    assert outsider.stable_user_id.encode() in response.content
    assert b'value="4"' in response.content
    assert AuditEvent.objects.using("audit").filter(action="admin_user_usage").exists()


def test_billing_and_usage_pages_never_take_a_user_parameter(client, owner, outsider):
    services.consume(outsider, "execute_calls_per_day", 5)
    client.force_login(owner)
    page = client.get(f"/account/usage?userId={outsider.stable_user_id}")
    assert b'value="5"' not in page.content
    billing = client.get(f"/account/billing?userId={outsider.stable_user_id}")
    assert outsider.username.encode() not in billing.content
