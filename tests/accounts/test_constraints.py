"""Every CHECK / UNIQUE / partial UNIQUE on the accounts tables is enforced by Postgres."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.accounts import models as m
from tests.constraints import refuses

pytestmark = pytest.mark.django_db

SOON = timezone.now() + timedelta(hours=1)


def _set(obj, **changes):
    for key, value in changes.items():
        setattr(obj, key, value)
    return lambda: obj.save(update_fields=list(changes))


# --- users -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "changes",
    [
        {"plan": "partner"},
        {"stripe_plan": "enterprise"},
        {"profile_visibility": "friends"},
        {"account_type": "robot"},
        {"verification_email_status": "lost"},
        {"job_retention_success_once_days": 0},
        {"job_retention_failed_once_days": 366},
        {"job_retention_disabled_recurring_days": -1},
    ],
)
def test_users_check_constraints_refuse_bad_values(owner, changes):
    refuses(_set(owner, **changes))


def test_users_accept_valid_plan_and_retention(owner):
    _set(owner, plan="max", stripe_plan="pro", job_retention_success_once_days=365)()
    _set(owner, verification_email_status="bounced", experiments_opt_in=True)()
    owner.refresh_from_db()
    assert (owner.plan, owner.verification_email_status) == ("max", "bounced")


def test_stripe_customer_id_is_unique_only_when_set(owner, outsider, make_user):
    assert owner.stripe_customer_id is None and outsider.stripe_customer_id is None
    _set(owner, stripe_customer_id="cus_1")()
    refuses(_set(outsider, stripe_customer_id="cus_1"))


def test_username_email_and_stable_id_are_unique(owner):
    refuses(
        lambda: m.User.objects.create(
            username=owner.username, email="x@example.com", stable_user_id="a" * 64
        )
    )
    refuses(
        lambda: m.User.objects.create(username="other", email=owner.email, stable_user_id="b" * 64)
    )
    refuses(
        lambda: m.User.objects.create(
            username="other2", email="y@example.com", stable_user_id=owner.stable_user_id
        )
    )


# --- email claims and token tables -----------------------------------------------------------


def test_email_claim_status_is_checked(owner):
    refuses(lambda: m.UserEmailClaim.objects.create(user=owner, email="a@x.io", status="stolen"))


def test_one_claim_row_per_user_and_email(owner):
    m.UserEmailClaim.objects.create(user=owner, email="a@x.io", status="claimed")
    refuses(lambda: m.UserEmailClaim.objects.create(user=owner, email="a@x.io", status="released"))


def test_an_address_is_claimed_by_at_most_one_account(owner, outsider):
    m.UserEmailClaim.objects.create(user=owner, email="old@x.io", status="claimed")
    refuses(
        lambda: m.UserEmailClaim.objects.create(user=outsider, email="old@x.io", status="claimed")
    )


def test_a_released_address_can_be_claimed_again(owner, outsider):
    m.UserEmailClaim.objects.create(
        user=owner, email="old@x.io", status="released", released_at=timezone.now()
    )
    m.UserEmailClaim.objects.create(user=outsider, email="old@x.io", status="claimed")
    assert m.UserEmailClaim.objects.filter(email="old@x.io").count() == 2


@pytest.mark.parametrize(
    "model", [m.PasswordReset, m.EmailVerification, m.PendingEmailClaimRelease]
)
def test_token_hashes_are_unique(owner, outsider, model):
    extra = {"email": "e@x.io"} if model is m.PendingEmailClaimRelease else {}
    model.objects.create(user=owner, token_hash="h1", expires_at=SOON, **extra)
    refuses(lambda: model.objects.create(user=outsider, token_hash="h1", expires_at=SOON, **extra))


def test_pending_email_change_token_and_new_email_are_unique(owner, outsider):
    m.PendingEmailChange.objects.create(
        user=owner, token_hash="t1", new_email="n@x.io", expires_at=SOON
    )
    refuses(
        lambda: m.PendingEmailChange.objects.create(
            user=outsider, token_hash="t2", new_email="n@x.io", expires_at=SOON
        )
    )
    refuses(
        lambda: m.PendingEmailChange.objects.create(
            user=outsider, token_hash="t1", new_email="other@x.io", expires_at=SOON
        )
    )


def test_one_pending_claim_release_per_user_and_email(owner):
    m.PendingEmailClaimRelease.objects.create(
        user=owner, email="e@x.io", token_hash="a", expires_at=SOON
    )
    refuses(
        lambda: m.PendingEmailClaimRelease.objects.create(
            user=owner, email="e@x.io", token_hash="b", expires_at=SOON
        )
    )


def test_identity_rows_cascade_with_the_user(owner, outsider):
    m.PasswordReset.objects.create(user=owner, token_hash="p", expires_at=SOON)
    m.EmailVerification.objects.create(user=owner, token_hash="v", expires_at=SOON)
    assert m.UserEmailClaim.objects.filter(user=owner).exists()  # every cast member holds one
    m.OAuthConnection.objects.create(provider_name="github", provider_id="1", user=owner)
    m.Passkey.objects.create(
        id="cred-1",
        aaguid="0",
        public_key="pk",
        user=owner,
        webauthn_user_handle="h",
        device_type="singleDevice",
    )
    m.PasswordReset.objects.create(user=outsider, token_hash="q", expires_at=SOON)
    owner.delete()
    assert m.PasswordReset.objects.filter(token_hash="q").exists()
    assert not m.PasswordReset.objects.filter(token_hash="p").exists()
    assert not m.EmailVerification.objects.exists()
    assert list(m.UserEmailClaim.objects.values_list("user", flat=True)) == [outsider.pk]
    assert not m.OAuthConnection.objects.exists()
    assert not m.Passkey.objects.exists()


# --- second factors, social logins, invites --------------------------------------------------


def _verification(target: str, type_: str = "2fa") -> m.Verification:
    return m.Verification.objects.create(
        type=type_,
        target=target,
        secret="s",
        algorithm="SHA1",
        digits=6,
        period=30,
        char_set="0123456789",
    )


def test_one_verification_per_target_and_type(owner):
    _verification(str(owner.pk))
    _verification(str(owner.pk), "2fa-verify")
    refuses(lambda: _verification(str(owner.pk)))


def test_a_social_identity_links_to_one_account(owner, outsider):
    m.OAuthConnection.objects.create(provider_name="github", provider_id="42", user=owner)
    m.OAuthConnection.objects.create(provider_name="google", provider_id="42", user=outsider)
    refuses(
        lambda: m.OAuthConnection.objects.create(
            provider_name="github", provider_id="42", user=outsider
        )
    )


@pytest.mark.parametrize("field,value", [("max_uses", 0), ("use_count", -1), ("plan", "partner")])
def test_invite_checks(field, value):
    refuses(lambda: m.Invite.objects.create(code=f"c-{field}", **{field: value}))


def test_invite_survives_its_creator(owner):
    m.Invite.objects.create(code="welcome", created_by=owner, plan="standard", max_uses=5)
    owner.delete()
    assert m.Invite.objects.get(code="welcome").created_by is None


# --- flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize("percent", [-1, 101])
def test_rollout_percent_is_a_percentage(percent):
    refuses(lambda: m.FeatureFlag.objects.create(key="f", rollout_percent=percent))


def test_flag_accepts_null_or_bounded_rollout(owner):
    m.FeatureFlag.objects.create(key="a", updated_by=owner)
    m.FeatureFlag.objects.create(key="b", rollout_percent=100)
    owner.delete()
    assert m.FeatureFlag.objects.get(key="a").updated_by is None


def test_one_override_per_flag_and_user(owner, outsider):
    m.FeatureFlagUserOverride.objects.create(flag_key="f", user=owner, enabled=True)
    m.FeatureFlagUserOverride.objects.create(flag_key="f", user=outsider, enabled=False)
    refuses(
        lambda: m.FeatureFlagUserOverride.objects.create(flag_key="f", user=owner, enabled=False)
    )


def test_exposure_rollup_key_is_unique(owner):
    row = dict(
        flag_key="f",
        user_id=owner.stable_user_id,
        day=timezone.now().date(),
        enabled=True,
        source="eval",
    )
    m.FeatureFlagExposureRollup.objects.create(**row)
    m.FeatureFlagExposureRollup.objects.create(**{**row, "enabled": False})
    refuses(lambda: m.FeatureFlagExposureRollup.objects.create(**row))


# --- platform config -------------------------------------------------------------------------


def _oauth_app(**extra) -> m.PlatformOAuthApp:
    fields = dict(
        slug="github",
        provider="github",
        client_id="cid",
        token_url="https://x.io/token",
        authorize_url="https://x.io/auth",
        flow="pkce",
    )
    return m.PlatformOAuthApp.objects.create(**{**fields, **extra})


@pytest.mark.parametrize("extra", [{"flow": "implicit"}, {"token_exchange_style": "xml"}])
def test_platform_oauth_app_checks(extra):
    refuses(lambda: _oauth_app(**extra))


def test_platform_oauth_app_valid_row():
    _oauth_app(flow="confidential", token_exchange_style="basic-json")
    assert m.PlatformOAuthApp.objects.count() == 1


@pytest.mark.parametrize(
    "extra",
    [
        {"priority": 1001},
        {"priority": -1},
        {"severity": "panic"},
        {"look": "modal"},
        {"page_targeting": "some"},
        {"audience": "admins"},
    ],
)
def test_site_banner_checks(extra):
    refuses(lambda: m.SiteBanner.objects.create(title="t", **extra))


def test_banner_dismissals_are_unique_and_cascade(owner, outsider):
    banner = m.SiteBanner.objects.create(title="t", priority=1000, created_by=owner)
    m.SiteBannerDismissal.objects.create(banner=banner, user=owner)
    m.SiteBannerDismissal.objects.create(banner=banner, user=outsider)
    refuses(lambda: m.SiteBannerDismissal.objects.create(banner=banner, user=owner))
    owner.delete()
    banner.refresh_from_db()
    assert banner.created_by is None
    assert list(banner.dismissals.values_list("user", flat=True)) == [outsider.pk]
    banner.delete()
    assert not m.SiteBannerDismissal.objects.exists()


# --- platform feedback -----------------------------------------------------------------------


def _feedback(**extra) -> m.PlatformFeedback:
    fields = dict(
        submitter_user_id="a" * 64,
        category="bug",
        summary="s",
        details="d",
        submitter_username="u",
        submitter_email="u@x.io",
    )
    return m.PlatformFeedback.objects.create(**{**fields, **extra})


@pytest.mark.parametrize(
    "extra",
    [
        {"category": "rant"},
        {"status": "closed"},
        {"summary": ""},
        {"summary": "x" * 201},
        {"details": ""},
        {"details": "x" * 8001},
        {"admin_note": "x" * 2001},
    ],
)
def test_platform_feedback_checks(extra):
    refuses(lambda: _feedback(**extra))


def test_platform_feedback_accepts_limits():
    _feedback(summary="x" * 200, details="x" * 8000, admin_note="x" * 2000, status="dismissed")
    _feedback(admin_note=None)
    assert m.PlatformFeedback.objects.count() == 2


# --- campaigns and referrals -----------------------------------------------------------------


def test_campaign_origin_is_checked():
    now = timezone.now()
    row = dict(state="Activated", entered_at=now, last_evaluated_at=now)
    m.UserUsageCampaign.objects.create(user_id="a" * 64, origin="seed", **row)
    refuses(lambda: m.UserUsageCampaign.objects.create(user_id="b" * 64, origin="cron", **row))


def test_campaign_send_ledger_is_idempotent():
    row = dict(user_id="a" * 64, state="VerifiedNoMcp", template="welcome", send_index=1)
    m.UserUsageCampaignSend.objects.create(**row)
    m.UserUsageCampaignSend.objects.create(**{**row, "send_index": 2})
    refuses(lambda: m.UserUsageCampaignSend.objects.create(**{**row, "template": "other"}))


def test_advocate_mail_is_capped_at_one_per_user_forever():
    advocate = dict(template="advocate_referral_testimonial", user_id="a" * 64)
    m.UserUsageCampaignSend.objects.create(state="Activated", send_index=1, **advocate)
    refuses(lambda: m.UserUsageCampaignSend.objects.create(state="Paid", send_index=1, **advocate))
    m.UserUsageCampaignSend.objects.create(
        state="Paid", send_index=1, template="advocate_referral_testimonial", user_id="b" * 64
    )


def test_tips_opt_out_is_one_row_per_user():
    m.UserTipsEmailOptOut.objects.create(user_id="a" * 64)
    refuses(lambda: m.UserTipsEmailOptOut.objects.create(user_id="a" * 64))


def test_referral_rules():
    m.Referral.objects.create(referrer_stable_user_id="r" * 64, referee_stable_user_id="a" * 64)
    m.Referral.objects.create(referrer_stable_user_id="r" * 64, referee_stable_user_id="b" * 64)
    # A referee is attributed once.
    refuses(
        lambda: m.Referral.objects.create(
            referrer_stable_user_id="s" * 64, referee_stable_user_id="a" * 64
        )
    )
    refuses(
        lambda: m.Referral.objects.create(
            referrer_stable_user_id="r" * 64, referee_stable_user_id="c" * 64, status="paid"
        )
    )
    # One invoice rewards one referral.
    m.Referral.objects.filter(referee_stable_user_id="a" * 64).update(
        status="rewarded", reward_invoice_id="in_1"
    )
    refuses(
        lambda: m.Referral.objects.filter(referee_stable_user_id="b" * 64).update(
            reward_invoice_id="in_1"
        )
    )


def test_username_redirect_and_agent_session_keys_are_unique():
    m.UsernameRedirect.objects.create(old_username="old", user_id="a" * 64)
    refuses(lambda: m.UsernameRedirect.objects.create(old_username="old", user_id="b" * 64))
    m.McpAgentSession.objects.create(do_id="do-1", user_id="a" * 64)
    refuses(lambda: m.McpAgentSession.objects.create(do_id="do-1", user_id="b" * 64))


def test_raw_delete_of_a_user_cascades_and_nulls_in_the_database(owner, outsider):
    """Account deletion ends with a raw DELETE FROM users; the database must do the rest."""
    from django.db import connection

    banner = m.SiteBanner.objects.create(title="t", created_by=owner, updated_by=owner)
    m.SiteBannerDismissal.objects.create(banner=banner, user=owner)
    m.FeatureFlag.objects.create(key="f", updated_by=owner)
    m.FeatureFlagUserOverride.objects.create(
        flag_key="f", user=owner, enabled=True, updated_by=outsider
    )
    m.Invite.objects.create(code="c", created_by=owner)
    assert m.UserEmailClaim.objects.filter(user=owner).exists()  # every cast member holds one
    for model in (m.PasswordReset, m.EmailVerification):
        model.objects.create(user=owner, token_hash=f"{model.__name__}-h", expires_at=SOON)
    m.PendingEmailChange.objects.create(
        user=owner, token_hash="c", new_email="n@x.io", expires_at=SOON
    )
    m.PendingEmailClaimRelease.objects.create(
        user=owner, token_hash="r", email="e@x.io", expires_at=SOON
    )
    m.OAuthConnection.objects.create(provider_name="github", provider_id="1", user=owner)
    m.Passkey.objects.create(
        id="cred",
        aaguid="0",
        public_key="pk",
        user=owner,
        webauthn_user_handle="h",
        device_type="singleDevice",
    )
    owner_pk = owner.pk
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM users WHERE id = %s", [owner_pk])
    banner.refresh_from_db()
    assert (banner.created_by_id, banner.updated_by_id) == (None, None)
    assert m.FeatureFlag.objects.get(key="f").updated_by_id is None
    assert m.Invite.objects.get(code="c").created_by_id is None
    for model in (
        m.SiteBannerDismissal,
        m.FeatureFlagUserOverride,
        m.UserEmailClaim,
        m.PasswordReset,
        m.EmailVerification,
        m.PendingEmailChange,
        m.PendingEmailClaimRelease,
        m.OAuthConnection,
        m.Passkey,
    ):
        assert not model.objects.filter(user_id=owner_pk).exists(), model.__name__
    assert m.UserEmailClaim.objects.filter(user=outsider).exists()
