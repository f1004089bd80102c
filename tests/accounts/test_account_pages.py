"""Account home, usage and settings pages: content, accessibility hooks, CSRF in every form."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from apps.accounts.models import User

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_home_shows_plan_username_and_links(owner: User, owner_client: Client) -> None:
    body = owner_client.get("/account").content.decode()
    assert owner.username in body and owner.stable_user_id in body and "Free" in body
    for path in ["/account/connections", "/account/usage", "/account/settings", "/account/billing"]:
        assert f'href="{path}"' in body


def test_usage_shows_the_plan_and_its_limits(owner: User, owner_client: Client) -> None:
    response = owner_client.get("/account/usage")
    body = response.content.decode()
    assert response.status_code == 200
    assert "Free" in body and "<table" in body and "250" in body  # free daily execute calls
    assert "Storage" in body and "16.0" in body  # 16 MiB


def test_usage_follows_the_effective_plan(owner: User, owner_client: Client) -> None:
    User.objects.filter(pk=owner.pk).update(stripe_plan="pro")
    body = owner_client.get("/account/usage").content.decode()
    assert "Pro" in body and "10,000" in body


def test_usage_counts_a_standard_overlay(owner: User, owner_client: Client) -> None:
    from datetime import timedelta

    from django.utils import timezone

    User.objects.filter(pk=owner.pk).update(
        referral_standard_credit_expires_at=timezone.now() + timedelta(days=3)
    )
    assert "Standard" in owner_client.get("/account/usage").content.decode()


def test_experiments_toggle(owner: User, owner_client: Client) -> None:
    owner_client.post("/account/settings/experiments", {"experiments_opt_in": "on"})
    owner.refresh_from_db()
    assert owner.experiments_opt_in is True
    page = owner_client.get("/account/settings").content.decode()
    assert re.search(r'<input[^>]*name="experiments_opt_in"[^>]*checked', page)
    owner_client.post("/account/settings/experiments", {})
    owner.refresh_from_db()
    assert owner.experiments_opt_in is False


@pytest.mark.parametrize(
    "path", ["/account", "/account/connections", "/account/usage", "/account/settings"]
)
def test_pages_have_landmarks_and_csrf_in_every_form(owner_client: Client, path: str) -> None:
    body = owner_client.get(path).content.decode()
    assert '<main id="main"' in body and 'aria-label="Main"' in body
    assert 'href="#main"' in body  # skip link
    # One external script, on the connections page only: its copy buttons (issue 39); the page
    # works without it. Never an inline script.
    scripts = re.findall(r"<script[^>]*>", body)
    allowed = (
        ['<script src="/static/kody-copy.js" defer>'] if path == "/account/connections" else []
    )
    assert scripts == allowed
    for form in re.findall(r"<form[^>]*method=\"post\".*?</form>", body, re.S):
        assert "csrfmiddlewaretoken" in form


def test_errors_are_tied_to_their_fields(client: Client) -> None:
    body = client.post(
        "/signup", {"email": "bad", "username": "x", "password": "1"}
    ).content.decode()
    for field in ["email", "username", "password"]:
        match = re.search(rf'<input[^>]*id="id_{field}"[^>]*>', body)
        assert match, field
        tag = match.group(0)
        assert 'aria-invalid="true"' in tag
        assert f"id_{field}_error" in re.search(r'aria-describedby="([^"]*)"', tag).group(1)
        assert f'id="id_{field}_error"' in body
        assert f'<label for="id_{field}"' in body
    assert 'class="error-summary" role="alert"' in body
    assert body.count("autofocus") == 1


def test_help_text_is_described(client: Client) -> None:
    body = client.get("/signup").content.decode()
    tag = re.search(r'<input[^>]*id="id_username"[^>]*>', body).group(0)
    assert 'aria-describedby="id_username_help"' in tag and 'id="id_username_help"' in body
