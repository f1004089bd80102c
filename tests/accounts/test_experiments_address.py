"""/account/experiments, the address the spec gives for the experiments preference, is a
permanent alias of the Experiments section of /account/settings: a GET lands there and a POST
is passed on, method and body kept, to the form's own endpoint."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.accounts.models import User

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_get_lands_on_the_experiments_section(owner_client: Client) -> None:
    response = owner_client.get("/account/experiments")
    assert response.status_code == 301
    assert response["Location"] == "/account/settings#experiments"
    page = owner_client.get(response["Location"]).content.decode()
    assert '<section aria-labelledby="experiments-title" id="experiments">' in page
    assert 'name="experiments_opt_in"' in page


def test_a_post_is_passed_on_and_changes_only_the_owner(
    owner: User, outsider: User, owner_client: Client
) -> None:
    response = owner_client.post("/account/experiments", {"experiments_opt_in": "on"})
    assert response.status_code == 308
    assert response["Location"] == "/account/settings/experiments"
    followed = owner_client.post("/account/experiments", {"experiments_opt_in": "on"}, follow=True)
    assert followed.redirect_chain[0] == ("/account/settings/experiments", 308)
    owner.refresh_from_db()
    outsider.refresh_from_db()
    assert owner.experiments_opt_in is True and outsider.experiments_opt_in is False


def test_signed_out_the_alias_changes_nothing(owner: User, client: Client) -> None:
    followed = client.post("/account/experiments", {"experiments_opt_in": "on"}, follow=True)
    assert "/login" in followed.redirect_chain[-1][0]
    owner.refresh_from_db()
    assert owner.experiments_opt_in is False
