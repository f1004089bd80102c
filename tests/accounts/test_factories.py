"""The shared cast and the accounts factories build people as the product would."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.accounts.models import EmailClaimStatus, User, UserEmailClaim
from apps.accounts.models.users import stable_user_id_for
from apps.accounts.services.tokens import authenticate_bearer
from apps.entitlements.plans import effective_plan_for
from tests.accounts.factories import AccessTokenFactory, UserFactory
from tests.cast import PASSWORD

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_the_cast_is_three_verified_people_and_only_the_operator_is_staff(
    owner, outsider, operator
):
    cast = [owner, outsider, operator]
    assert len({person.stable_user_id for person in cast}) == 3
    for person in cast:
        assert person.email_verified_at is not None and person.check_password(PASSWORD)
        assert person.stable_user_id == stable_user_id_for(person.email)
        claim = UserEmailClaim.objects.get(user=person)
        assert (claim.email, claim.status) == (person.email, EmailClaimStatus.CLAIMED)
    assert [p.is_staff for p in cast] == [False, False, True]


def test_the_cast_signs_in_through_the_login_form(client, owner):
    response = client.post("/login", {"identifier": owner.username, "password": PASSWORD})
    assert response.status_code == 302
    assert client.get("/account").status_code == 200


def test_an_access_token_from_the_factory_authenticates_its_user_only(owner, outsider):
    token = AccessTokenFactory(user=owner)
    assert authenticate_bearer(token.raw) == token
    assert token.raw not in {token.token_hash, token.token_prefix}
    assert authenticate_bearer(AccessTokenFactory(user=outsider).raw).user == outsider


def test_plan_and_subscription_traits_set_the_effective_plan():
    now = timezone.now()
    assert effective_plan_for(UserFactory(), now=now).value == "free"
    assert effective_plan_for(UserFactory(plan="max"), now=now).value == "max"
    subscribed = UserFactory(subscribed=True, stripe_plan="standard")
    assert subscribed.stripe_customer_id and subscribed.stripe_plan_refreshed_at
    assert effective_plan_for(subscribed, now=now).value == "standard"
    assert User.objects.filter(stripe_customer_id__isnull=False).count() == 1


def test_unverified_people_have_no_verified_email():
    assert UserFactory(unverified=True).email_verified_at is None
