"""factory_boy factories for the accounts app: people (verified by default; operators; plans and
Stripe subscriptions), access tokens, email claims, social logins and referrals."""

from __future__ import annotations

import secrets
from typing import Any

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory, Password

from apps.accounts.models import (
    AccessToken,
    EmailClaimStatus,
    OAuthConnection,
    Referral,
    User,
    UserEmailClaim,
)
from apps.accounts.models.feedback import FeedbackCategory, PlatformFeedback
from apps.accounts.models.flags import FeatureFlagExposureRollup
from apps.accounts.models.users import stable_user_id_for
from apps.accounts.services.tokens import DISPLAY_CHARS, PAT_PREFIX, SECRET_BYTES, hash_secret

PASSWORD = "correct-horse-battery-staple-9"


class UserFactory(DjangoModelFactory):
    """A person as signup + verification leaves them: verified email, live email claim."""

    class Meta:
        model = User
        skip_postgeneration_save = True

    class Params:
        unverified = factory.Trait(email_verified_at=None)
        operator = factory.Trait(is_staff=True, is_superuser=True)
        # A paying customer as the Stripe webhook leaves them; ``stripe_plan=`` picks the plan.
        # The operator-set plan is plain ``plan=`` (``UserFactory(plan="max")``).
        subscribed = factory.Trait(
            stripe_customer_id=factory.Sequence(lambda n: f"cus_test{n}"),
            stripe_plan="pro",
            stripe_plan_refreshed_at=factory.LazyFunction(timezone.now),
        )

    username = factory.Sequence(lambda n: f"person{n}")
    email = factory.LazyAttribute(lambda user: f"{user.username}@example.com")
    stable_user_id = factory.LazyAttribute(lambda user: stable_user_id_for(user.email))
    password = Password(PASSWORD)
    email_verified_at = factory.LazyFunction(timezone.now)

    @factory.post_generation
    def email_claim(user: User, create: bool, extracted: Any, **kwargs: Any) -> None:
        # Signup claims the address before it is verified; every real account holds one.
        if create:
            UserEmailClaim.objects.create(
                user=user, email=user.email, status=EmailClaimStatus.CLAIMED
            )


class AccessTokenFactory(DjangoModelFactory):
    """A personal access token; the plaintext is on the instance as ``.raw`` (never stored)."""

    class Meta:
        model = AccessToken

    user = factory.SubFactory(UserFactory)
    name = factory.Sequence(lambda n: f"token {n}")
    raw = factory.LazyFunction(lambda: PAT_PREFIX + secrets.token_urlsafe(SECRET_BYTES))
    token_prefix = factory.LazyAttribute(lambda token: token.raw[: len(PAT_PREFIX) + DISPLAY_CHARS])
    token_hash = factory.LazyAttribute(lambda token: hash_secret(token.raw))

    @classmethod
    def _create(cls, model_class: type[AccessToken], *args: Any, **kwargs: Any) -> AccessToken:
        raw = kwargs.pop("raw")
        token = super()._create(model_class, *args, **kwargs)
        token.raw = raw  # type: ignore[attr-defined]
        return token


class FeatureFlagExposureRollupFactory(DjangoModelFactory):
    """One person's exposures to one flag on one day."""

    class Meta:
        model = FeatureFlagExposureRollup

    flag_key = factory.Sequence(lambda n: f"flag-{n}")
    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)
    day = factory.LazyFunction(lambda: timezone.now().date())
    enabled = True
    source = "default"
    exposure_count = 1


class PlatformFeedbackFactory(DjangoModelFactory):
    """Open feedback from a person; ``status=`` and ``updated_at=`` move it along."""

    class Meta:
        model = PlatformFeedback

    submitter_user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)
    category = FeedbackCategory.BUG
    summary = "It broke"
    details = "Steps to reproduce."
    submitter_username = factory.Sequence(lambda n: f"person{n}")
    submitter_email = factory.LazyAttribute(lambda f: f"{f.submitter_username}@example.com")


class UserEmailClaimFactory(DjangoModelFactory):
    """A further address claimed by a person (``UserFactory`` already claims its own)."""

    class Meta:
        model = UserEmailClaim

    user = factory.SubFactory(UserFactory)
    email = factory.Sequence(lambda n: f"claimed{n}@example.com")
    status = EmailClaimStatus.CLAIMED


class OAuthConnectionFactory(DjangoModelFactory):
    """A social login linked to a person."""

    class Meta:
        model = OAuthConnection

    user = factory.SubFactory(UserFactory)
    provider_name = "github"
    provider_id = factory.Sequence(lambda n: str(4200 + n))


class ReferralFactory(DjangoModelFactory):
    """``referrer`` brought ``referee`` in: pass people (``referrer=outsider``) or stable ids."""

    class Meta:
        model = Referral
        exclude = ("referrer", "referee")

    referrer = factory.SubFactory(UserFactory)
    referee = factory.SubFactory(UserFactory)
    referrer_stable_user_id = factory.LazyAttribute(lambda row: row.referrer.stable_user_id)
    referee_stable_user_id = factory.LazyAttribute(lambda row: row.referee.stable_user_id)
