"""Every CHECK / UNIQUE / partial UNIQUE on the accounts tables is enforced by Postgres."""

from __future__ import annotations

import pytest
from django.utils import timezone

from apps.accounts import models as m
from tests.accounts import factories as f
from tests.accounts.factories import UserFactory
from tests.constraints import refuses

pytestmark = pytest.mark.django_db


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
    refuses(lambda: UserFactory(username=owner.username, email="x@example.com"))
    refuses(lambda: UserFactory(username="other", email=owner.email, stable_user_id="b" * 64))
    refuses(lambda: UserFactory(username="other2", stable_user_id=owner.stable_user_id))


# --- email claims and token tables -----------------------------------------------------------


def test_email_claim_status_is_checked(owner):
    refuses(lambda: f.UserEmailClaimFactory(user=owner, status="stolen"))


def test_one_claim_row_per_user_and_email(owner):
    f.UserEmailClaimFactory(user=owner, email="a@x.io")
    refuses(lambda: f.UserEmailClaimFactory(user=owner, email="a@x.io", status="released"))


def test_an_address_is_claimed_by_at_most_one_account(owner, outsider):
    f.UserEmailClaimFactory(user=owner, email="old@x.io")
    refuses(lambda: f.UserEmailClaimFactory(user=outsider, email="old@x.io"))


def test_a_released_address_can_be_claimed_again(owner, outsider):
    f.UserEmailClaimFactory(
        user=owner, email="old@x.io", status="released", released_at=timezone.now()
    )
    f.UserEmailClaimFactory(user=outsider, email="old@x.io")
    assert m.UserEmailClaim.objects.filter(email="old@x.io").count() == 2


@pytest.mark.parametrize(
    "factory",
    [f.PasswordResetFactory, f.EmailVerificationFactory, f.PendingEmailClaimReleaseFactory],
    ids=lambda factory: factory._meta.model.__name__,
)
def test_token_hashes_are_unique(owner, outsider, factory):
    factory(user=owner, token_hash="h1")
    refuses(lambda: factory(user=outsider, token_hash="h1"))


def test_pending_email_change_token_and_new_email_are_unique(owner, outsider):
    f.PendingEmailChangeFactory(user=owner, token_hash="t1", new_email="n@x.io")
    refuses(lambda: f.PendingEmailChangeFactory(user=outsider, new_email="n@x.io"))
    refuses(lambda: f.PendingEmailChangeFactory(user=outsider, token_hash="t1"))


def test_one_pending_claim_release_per_user_and_email(owner):
    f.PendingEmailClaimReleaseFactory(user=owner, email="e@x.io")
    refuses(lambda: f.PendingEmailClaimReleaseFactory(user=owner, email="e@x.io"))


def test_identity_rows_cascade_with_the_user(owner, outsider):
    f.PasswordResetFactory(user=owner, token_hash="p")
    f.EmailVerificationFactory(user=owner)
    assert m.UserEmailClaim.objects.filter(user=owner).exists()  # every cast member holds one
    f.OAuthConnectionFactory(user=owner)
    f.PasskeyFactory(user=owner)
    f.PasswordResetFactory(user=outsider, token_hash="q")
    owner.delete()
    assert m.PasswordReset.objects.filter(token_hash="q").exists()
    assert not m.PasswordReset.objects.filter(token_hash="p").exists()
    assert not m.EmailVerification.objects.exists()
    assert list(m.UserEmailClaim.objects.values_list("user", flat=True)) == [outsider.pk]
    assert not m.OAuthConnection.objects.exists()
    assert not m.Passkey.objects.exists()


# --- second factors, social logins, invites --------------------------------------------------


def test_one_verification_per_target_and_type(owner):
    f.VerificationFactory(target=str(owner.pk))
    f.VerificationFactory(target=str(owner.pk), type="2fa-verify")
    refuses(lambda: f.VerificationFactory(target=str(owner.pk)))


def test_a_social_identity_links_to_one_account(owner, outsider):
    f.OAuthConnectionFactory(provider_name="github", provider_id="42", user=owner)
    f.OAuthConnectionFactory(provider_name="google", provider_id="42", user=outsider)
    refuses(lambda: f.OAuthConnectionFactory(provider_name="github", provider_id="42"))


@pytest.mark.parametrize("field,value", [("max_uses", 0), ("use_count", -1), ("plan", "partner")])
def test_invite_checks(field, value):
    refuses(lambda: f.InviteFactory(created_by=None, **{field: value}))


def test_invite_survives_its_creator(owner):
    f.InviteFactory(code="welcome", created_by=owner, plan="standard", max_uses=5)
    owner.delete()
    assert m.Invite.objects.get(code="welcome").created_by is None


# --- flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize("percent", [-1, 101])
def test_rollout_percent_is_a_percentage(percent):
    refuses(lambda: f.FeatureFlagFactory(rollout_percent=percent))


def test_flag_accepts_null_or_bounded_rollout(owner):
    f.FeatureFlagFactory(key="a", updated_by=owner)
    f.FeatureFlagFactory(key="b", rollout_percent=100)
    owner.delete()
    assert m.FeatureFlag.objects.get(key="a").updated_by is None


def test_one_override_per_flag_and_user(owner, outsider):
    f.FeatureFlagUserOverrideFactory(flag_key="f", user=owner)
    f.FeatureFlagUserOverrideFactory(flag_key="f", user=outsider, enabled=False)
    refuses(lambda: f.FeatureFlagUserOverrideFactory(flag_key="f", user=owner, enabled=False))


def test_exposure_rollup_key_is_unique(owner):
    row = dict(flag_key="f", user_id=owner.stable_user_id, day=timezone.now().date())
    f.FeatureFlagExposureRollupFactory(**row, enabled=True)
    f.FeatureFlagExposureRollupFactory(**row, enabled=False)
    refuses(lambda: f.FeatureFlagExposureRollupFactory(**row, enabled=True))


# --- platform config -------------------------------------------------------------------------


@pytest.mark.parametrize("extra", [{"flow": "implicit"}, {"token_exchange_style": "xml"}])
def test_platform_oauth_app_checks(extra):
    refuses(lambda: f.PlatformOAuthAppFactory(**extra))


def test_platform_oauth_app_valid_row():
    f.PlatformOAuthAppFactory(flow="confidential", token_exchange_style="basic-json")
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
    refuses(lambda: f.SiteBannerFactory(**extra))


def test_banner_dismissals_are_unique_and_cascade(owner, outsider):
    banner = f.SiteBannerFactory(priority=1000, created_by=owner)
    f.SiteBannerDismissalFactory(banner=banner, user=owner)
    f.SiteBannerDismissalFactory(banner=banner, user=outsider)
    refuses(lambda: f.SiteBannerDismissalFactory(banner=banner, user=owner))
    owner.delete()
    banner.refresh_from_db()
    assert banner.created_by is None
    assert list(banner.dismissals.values_list("user", flat=True)) == [outsider.pk]
    banner.delete()
    assert not m.SiteBannerDismissal.objects.exists()


# --- platform feedback -----------------------------------------------------------------------


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
    refuses(lambda: f.PlatformFeedbackFactory(submitter_user_id="a" * 64, **extra))


def test_platform_feedback_accepts_limits():
    f.PlatformFeedbackFactory(
        submitter_user_id="a" * 64,
        summary="x" * 200,
        details="x" * 8000,
        admin_note="x" * 2000,
        status="dismissed",
    )
    f.PlatformFeedbackFactory(submitter_user_id="a" * 64, admin_note=None)
    assert m.PlatformFeedback.objects.count() == 2


# --- campaigns and referrals -----------------------------------------------------------------


def test_campaign_origin_is_checked():
    f.UserUsageCampaignFactory(user_id="a" * 64, origin="seed")
    refuses(lambda: f.UserUsageCampaignFactory(user_id="b" * 64, origin="cron"))


def test_campaign_send_ledger_is_idempotent():
    row = dict(user_id="a" * 64, state="VerifiedNoMcp", template="welcome")
    f.UserUsageCampaignSendFactory(**row, send_index=1)
    f.UserUsageCampaignSendFactory(**row, send_index=2)
    refuses(lambda: f.UserUsageCampaignSendFactory(**{**row, "template": "other"}, send_index=1))


def test_advocate_mail_is_capped_at_one_per_user_forever():
    advocate = dict(template="advocate_referral_testimonial", send_index=1)
    f.UserUsageCampaignSendFactory(user_id="a" * 64, state="Activated", **advocate)
    refuses(lambda: f.UserUsageCampaignSendFactory(user_id="a" * 64, state="Paid", **advocate))
    f.UserUsageCampaignSendFactory(user_id="b" * 64, state="Paid", **advocate)


def test_tips_opt_out_is_one_row_per_user():
    f.UserTipsEmailOptOutFactory(user_id="a" * 64)
    refuses(lambda: f.UserTipsEmailOptOutFactory(user_id="a" * 64))


def test_referral_rules():
    referral = f.ReferralFactory
    referral(referrer_stable_user_id="r" * 64, referee_stable_user_id="a" * 64)
    referral(referrer_stable_user_id="r" * 64, referee_stable_user_id="b" * 64)
    # A referee is attributed once.
    refuses(lambda: referral(referrer_stable_user_id="s" * 64, referee_stable_user_id="a" * 64))
    refuses(
        lambda: referral(
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
    f.UsernameRedirectFactory(old_username="old", user_id="a" * 64)
    refuses(lambda: f.UsernameRedirectFactory(old_username="old", user_id="b" * 64))
    f.McpAgentSessionFactory(do_id="do-1", user_id="a" * 64)
    refuses(lambda: f.McpAgentSessionFactory(do_id="do-1", user_id="b" * 64))


def test_raw_delete_of_a_user_cascades_and_nulls_in_the_database(owner, outsider):
    """Account deletion ends with a raw DELETE FROM users; the database must do the rest."""
    from django.db import connection

    banner = f.SiteBannerFactory(created_by=owner, updated_by=owner)
    f.SiteBannerDismissalFactory(banner=banner, user=owner)
    f.FeatureFlagFactory(key="f", updated_by=owner)
    f.FeatureFlagUserOverrideFactory(flag_key="f", user=owner, updated_by=outsider)
    f.InviteFactory(code="c", created_by=owner)
    assert m.UserEmailClaim.objects.filter(user=owner).exists()  # every cast member holds one
    f.PasswordResetFactory(user=owner)
    f.EmailVerificationFactory(user=owner)
    f.PendingEmailChangeFactory(user=owner)
    f.PendingEmailClaimReleaseFactory(user=owner)
    f.OAuthConnectionFactory(user=owner)
    f.PasskeyFactory(user=owner)
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
