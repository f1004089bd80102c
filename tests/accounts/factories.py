"""factory_boy factories for the accounts app: people (verified by default; operators; plans and
Stripe subscriptions), access tokens, and one factory for each other accounts model (mailed
tokens, second factors, flags, platform rows, campaigns, operator records, audit events)."""

from __future__ import annotations

import functools
import secrets
from datetime import timedelta
from typing import Any

import factory
from django.contrib.auth.hashers import make_password
from django.utils import timezone
from factory.django import DjangoModelFactory, Password

from apps.accounts import models as acc
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


@functools.cache
def _hashed(raw: str) -> str:
    # PBKDF2 at Django's 1,000,000 iterations takes a second or more per call here; hashing each
    # distinct password once per process and sharing the salted hash keeps every cast member
    # from paying for it. The hash is a real one: check_password and a subprocess server agree.
    return make_password(raw)


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
    password = Password(PASSWORD, transform=_hashed)
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


in_an_hour = factory.LazyFunction(lambda: timezone.now() + timedelta(hours=1))
a_token_hash = factory.LazyFunction(lambda: hash_secret(secrets.token_urlsafe(16)))


class PasswordResetFactory(DjangoModelFactory):
    class Meta:
        model = acc.PasswordReset

    user = factory.SubFactory(UserFactory)
    token_hash = a_token_hash
    expires_at = in_an_hour


class EmailVerificationFactory(PasswordResetFactory):
    class Meta:
        model = acc.EmailVerification


class PendingEmailChangeFactory(PasswordResetFactory):
    class Meta:
        model = acc.PendingEmailChange

    new_email = factory.Sequence(lambda n: f"changed{n}@example.com")


class PendingEmailClaimReleaseFactory(PasswordResetFactory):
    class Meta:
        model = acc.PendingEmailClaimRelease

    email = factory.Sequence(lambda n: f"released{n}@example.com")


class VerificationFactory(DjangoModelFactory):
    """A TOTP second factor for a person (``target`` is the user's primary key)."""

    class Meta:
        model = acc.Verification

    type = "2fa"
    target = factory.LazyFunction(lambda: str(UserFactory().pk))
    secret = factory.LazyFunction(lambda: secrets.token_hex(10))
    algorithm = "SHA1"
    digits = 6
    period = 30
    char_set = "0123456789"


class PasskeyFactory(DjangoModelFactory):
    class Meta:
        model = acc.Passkey

    id = factory.Sequence(lambda n: f"cred-{n}")
    aaguid = "0"
    public_key = factory.LazyFunction(lambda: secrets.token_hex(32))
    user = factory.SubFactory(UserFactory)
    webauthn_user_handle = factory.Sequence(lambda n: f"handle-{n}")
    device_type = "singleDevice"
    name = "laptop"


class InviteFactory(DjangoModelFactory):
    class Meta:
        model = acc.Invite

    code = factory.Sequence(lambda n: f"welcome-{n}")
    created_by = factory.SubFactory(UserFactory)


class UsernameRedirectFactory(DjangoModelFactory):
    class Meta:
        model = acc.UsernameRedirect

    old_username = factory.Sequence(lambda n: f"formerly{n}")
    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)


class AccountWriteLeaseRepairFactory(DjangoModelFactory):
    """An operator's repair of a stuck write lease (the lease token is a credential)."""

    class Meta:
        model = acc.AccountWriteLeaseRepair

    target_user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)
    repaired_by_user_id = factory.LazyFunction(lambda: UserFactory(operator=True).stable_user_id)
    lease_token = factory.LazyFunction(lambda: secrets.token_hex(16))
    lease_holder = "job"
    lease_acquired_at = factory.LazyFunction(timezone.now)
    reason = "stuck"


class McpAgentSessionFactory(DjangoModelFactory):
    class Meta:
        model = acc.McpAgentSession

    do_id = factory.Sequence(lambda n: f"do-{n}")
    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)


class AuditEventFactory(DjangoModelFactory):
    """A row in the audit database (its own alias, as the router sends it)."""

    class Meta:
        model = acc.AuditEvent
        database = "audit"

    category = "auth"
    action = "login"
    result = "success"


class FeatureFlagFactory(DjangoModelFactory):
    class Meta:
        model = acc.FeatureFlag

    key = factory.Sequence(lambda n: f"beta-{n}")


class FeatureFlagUserOverrideFactory(DjangoModelFactory):
    class Meta:
        model = acc.FeatureFlagUserOverride

    flag_key = factory.LazyFunction(lambda: FeatureFlagFactory().key)
    user = factory.SubFactory(UserFactory)
    enabled = True


class PlatformOAuthAppFactory(DjangoModelFactory):
    """An operator-registered OAuth app (the client secret is stored encrypted)."""

    class Meta:
        model = acc.PlatformOAuthApp

    slug = "google"
    provider = "google"
    client_id = "client-1"
    client_secret_encrypted = "PLATFORM-CIPHERTEXT"
    token_url = "https://oauth.example.com/token"
    authorize_url = "https://oauth.example.com/authorize"
    flow = "confidential"


class SiteBannerFactory(DjangoModelFactory):
    class Meta:
        model = acc.SiteBanner

    title = "Maintenance"


class SiteBannerDismissalFactory(DjangoModelFactory):
    class Meta:
        model = acc.SiteBannerDismissal

    banner = factory.SubFactory(SiteBannerFactory)
    user = factory.SubFactory(UserFactory)


class PlatformProviderMarkFactory(DjangoModelFactory):
    class Meta:
        model = acc.PlatformProviderMark

    slug = "github"
    label = "GitHub"


class UserUsageCampaignFactory(DjangoModelFactory):
    class Meta:
        model = acc.UserUsageCampaign

    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)
    state = "Activated"
    entered_at = factory.LazyFunction(timezone.now)
    last_evaluated_at = factory.LazyFunction(timezone.now)
    origin = "event"


class UserUsageCampaignSendFactory(DjangoModelFactory):
    class Meta:
        model = acc.UserUsageCampaignSend

    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)
    state = "Activated"
    template = "welcome"
    send_index = 1


class UserTipsEmailOptOutFactory(DjangoModelFactory):
    class Meta:
        model = acc.UserTipsEmailOptOut

    user_id = factory.LazyFunction(lambda: UserFactory().stable_user_id)


class AccountDeletionFactory(DjangoModelFactory):
    """A deletion an operator requested for ``subject`` (a person; not stored itself)."""

    class Meta:
        model = acc.AccountDeletion
        exclude = ("subject",)

    subject = factory.SubFactory(UserFactory)
    subject_user_id = factory.LazyAttribute(lambda row: row.subject.stable_user_id)
    subject_db_id = factory.LazyAttribute(lambda row: row.subject.pk)
    requested_by = "operator"


class OAuthApplicationFactory(DjangoModelFactory):
    """A dynamically registered public MCP client (as ``POST /oauth/register`` leaves it)."""

    class Meta:
        model = "oauth2_provider.Application"

    name = factory.Sequence(lambda n: f"Agent {n}")
    client_type = "public"
    authorization_grant_type = "authorization-code"
    redirect_uris = "http://127.0.0.1:53682/callback"
    registration_source = "dcr"


class OAuthGrantFactory(DjangoModelFactory):
    """A person's approved connection to an OAuth client."""

    class Meta:
        model = "accounts.OAuthGrant"

    user = factory.SubFactory(UserFactory)
    application = factory.SubFactory(OAuthApplicationFactory)
    client_id = factory.LazyAttribute(lambda grant: grant.application.client_id)
    client_name = factory.LazyAttribute(lambda grant: grant.application.name)
    scopes = factory.LazyFunction(lambda: ["account", "email"])


class OAuthAccessTokenFactory(AccessTokenFactory):
    """The ``access_tokens`` row of an OAuth access token of ``grant`` (pass ``grant=``)."""

    class Params:
        grant = None

    user = factory.LazyAttribute(lambda token: token.grant.user)
    kind = "oauth"
    name = factory.LazyAttribute(lambda token: token.grant.client_name)
    client_id = factory.LazyAttribute(lambda token: token.grant.client_id)
    scopes = factory.LazyAttribute(lambda token: list(token.grant.scopes))
    audience = factory.LazyFunction(lambda: ["http://127.0.0.1:8000/mcp"])
