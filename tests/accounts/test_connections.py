"""Access tokens in the account UI: shown once, listed, revoked; never across accounts."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts.models import AccessToken, User
from apps.accounts.services import tokens

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_created_token_is_shown_once(owner: User, owner_client: Client) -> None:
    response = owner_client.post("/account/connections/new", {"name": "laptop agent"})
    assert response.status_code == 201
    assert response["Cache-Control"].startswith("max-age=0")
    plaintext = response.context["plaintext"]
    body = response.content.decode()
    assert plaintext in body and "shown only this once" in body
    token = AccessToken.objects.get(user=owner)
    assert token.name == "laptop agent" and plaintext not in token.token_hash

    listing = owner_client.get("/account/connections").content.decode()
    assert '<th scope="row">laptop agent</th>' in listing and plaintext not in listing
    assert "Never" in listing  # last used
    assert tokens.authenticate_bearer(plaintext) == token
    assert "Never" not in owner_client.get("/account/connections").content.decode()


def test_blank_name_is_explained(owner_client: Client) -> None:
    response = owner_client.post("/account/connections/new", {"name": "   "})
    assert response.status_code in (400, 422)
    assert b'id="id_name_error"' in response.content
    assert not AccessToken.objects.exists()


def test_revoke_cuts_the_token_off(owner: User, owner_client: Client) -> None:
    token, plaintext = tokens.create_token(owner, "old laptop")
    response = owner_client.post(f"/account/connections/{token.pk}/revoke")
    assert response.status_code == 302 and response.url == "/account/connections"
    assert tokens.authenticate_bearer(plaintext) is None
    listing = owner_client.get("/account/connections").content.decode()
    assert '<th scope="row">old laptop</th>' not in listing


def test_revoke_is_post_only(owner: User, owner_client: Client) -> None:
    token, _ = tokens.create_token(owner, "laptop")
    assert owner_client.get(f"/account/connections/{token.pk}/revoke").status_code == 405


def test_outsider_does_not_see_the_owners_tokens(owner: User, outsider_client: Client) -> None:
    tokens.create_token(owner, "owner-secret-laptop")
    page = outsider_client.get("/account/connections").content.decode()
    assert "owner-secret-laptop" not in page
    assert "You have no access tokens yet" in page


def test_outsider_cannot_revoke_the_owners_token(owner: User, outsider_client: Client) -> None:
    token, plaintext = tokens.create_token(owner, "laptop")
    response = outsider_client.post(f"/account/connections/{token.pk}/revoke")
    assert response.status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None and tokens.authenticate_bearer(plaintext) == token


def test_unknown_token_id_is_404(owner_client: Client) -> None:
    assert owner_client.post("/account/connections/999999/revoke").status_code == 404
