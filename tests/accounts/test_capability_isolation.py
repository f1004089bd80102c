"""A token for one person never reads or changes another person's data, capability by capability."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import authenticate_bearer
from kody.capabilities import all_capabilities
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

Token = tuple[AccessToken, str]

# Every accounts capability must have a cross-user test below; a new one fails this list.
COVERED = {
    "whoami",
    "accessTokenList",
    "accessTokenRevoke",
    "accountExportManifest",
    "accountExportSection",
}


def call(api: APIClient, raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return api.post(f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw))


def test_every_accounts_capability_has_an_isolation_test() -> None:
    declared = {
        c.name for c in all_capabilities() if c.handler.__module__ == "apps.accounts.capabilities"
    }
    assert declared == COVERED


def test_whoami_returns_only_the_caller(
    api: APIClient, owner: User, outsider: User, owner_token: Token, outsider_token: Token
) -> None:
    assert call(api, owner_token[1], "whoami").json()["userId"] == owner.stable_user_id
    assert call(api, outsider_token[1], "whoami").json()["userId"] == outsider.stable_user_id


def test_whoami_ignores_attempts_to_name_another_user(
    api: APIClient, outsider: User, owner_token: Token
) -> None:
    response = call(api, owner_token[1], "whoami", {"userId": outsider.stable_user_id})
    assert response.status_code == 422
    response = api.get(f"/api/v1/whoami?userId={outsider.stable_user_id}", **bearer(owner_token[1]))
    assert response.status_code == 422


def test_token_list_never_shows_another_users_tokens(
    api: APIClient, owner_token: Token, outsider_token: Token
) -> None:
    listed = call(api, owner_token[1], "accessTokenList").json()["tokens"]
    assert [t["id"] for t in listed] == [owner_token[0].pk]


def test_outsider_cannot_revoke_the_owners_token(
    api: APIClient, owner_token: Token, outsider_token: Token
) -> None:
    response = call(api, outsider_token[1], "accessTokenRevoke", {"tokenId": owner_token[0].pk})

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "token_not_found"
    assert authenticate_bearer(owner_token[1]) is not None


def test_not_found_looks_the_same_for_foreign_and_missing_tokens(
    api: APIClient, owner_token: Token, outsider_token: Token
) -> None:
    foreign = call(api, outsider_token[1], "accessTokenRevoke", {"tokenId": owner_token[0].pk})
    missing = call(api, outsider_token[1], "accessTokenRevoke", {"tokenId": 987654})
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json()


def test_export_capabilities_answer_only_for_the_caller(
    api: APIClient, owner: User, outsider: User, owner_token: Token, outsider_token: Token
) -> None:
    """Each sees their own manifest; a cursor from one person's export is refused to another."""
    mine = call(api, owner_token[1], "accountExportManifest").json()
    theirs = call(api, outsider_token[1], "accountExportManifest").json()
    assert mine["userId"] == owner.stable_user_id and theirs["userId"] == outsider.stable_user_id
    tokens = {s["table"]: s["count"] for s in mine["sections"] if s["section"] == "d1_table"}
    assert tokens["access_tokens"] == AccessToken.objects.filter(user=owner).count()
    page = call(
        api,
        owner_token[1],
        "accountExportSection",
        {"section": "d1_table", "table": "users", "limit": 1},
    ).json()
    assert [row["stable_user_id"] for row in page["rows"]] == [owner.stable_user_id]
    forged = call(
        api,
        outsider_token[1],
        "accountExportSection",
        {"section": "d1_table", "table": "access_tokens", "limit": 1, "cursor": "x" * 40},
    )
    assert forged.status_code == 400 and forged.json()["error"]["code"] == "invalid_cursor"
