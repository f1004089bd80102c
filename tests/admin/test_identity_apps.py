"""Every admin page of accounts/entitlements/jobs/system_email renders, and never a credential."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse

from apps.accounts import models as acc
from apps.entitlements import models as ent
from apps.system_email import models as se
from tests.accounts import factories as f
from tests.entitlements import factories as ent_f
from tests.jobs import factories as jobs_f
from tests.system_email import factories as se_f

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

MY_APPS = {"accounts", "entitlements", "jobs", "system_email"}
SECRET = "SENTINEL-credential-value"
UID = "a" * 64


def _registered() -> list[type]:
    return sorted(
        (model for model in admin.site._registry if model._meta.app_label in MY_APPS),
        key=lambda model: model._meta.label,
    )


@pytest.fixture
def staff(operator_client):
    return operator_client


@pytest.fixture
def rows(owner) -> list:
    """One row per model, with a recognisable value in every credential column."""
    banner = f.SiteBannerFactory()
    message = se_f.SystemEmailMessageFactory()
    return [
        owner,
        acc.UserEmailClaim.objects.get(user=owner),  # the cast holds its live claim
        f.PasswordResetFactory(user=owner, token_hash=SECRET + "1"),
        f.EmailVerificationFactory(user=owner, token_hash=SECRET + "2"),
        f.PendingEmailChangeFactory(user=owner, token_hash=SECRET + "3"),
        f.PendingEmailClaimReleaseFactory(user=owner, token_hash=SECRET + "4"),
        f.VerificationFactory(target=str(owner.pk), secret=SECRET + "5"),
        f.PasskeyFactory(user=owner, public_key=SECRET + "6"),
        f.OAuthConnectionFactory(user=owner),
        f.InviteFactory(created_by=owner),
        f.UsernameRedirectFactory(user_id=UID),
        f.AccountWriteLeaseRepairFactory(
            target_user_id=UID, repaired_by_user_id=UID, lease_token=SECRET + "7"
        ),
        f.McpAgentSessionFactory(user_id=UID),
        f.OAuthGrantFactory(user=owner),
        f.AuditEventFactory(),
        f.FeatureFlagFactory(key="beta"),
        f.FeatureFlagUserOverrideFactory(flag_key="beta", user=owner),
        f.FeatureFlagExposureRollupFactory(flag_key="beta", user_id=UID),
        f.PlatformOAuthAppFactory(slug="github", client_secret_encrypted=SECRET + "8"),
        banner,
        f.SiteBannerDismissalFactory(banner=banner, user=owner),
        f.PlatformProviderMarkFactory(),
        f.PlatformFeedbackFactory(submitter_user_id=UID),
        f.UserUsageCampaignFactory(user_id=UID),
        f.UserUsageCampaignSendFactory(user_id=UID),
        f.UserTipsEmailOptOutFactory(user_id=UID),
        f.ReferralFactory(referrer_stable_user_id=UID, referee_stable_user_id="b" * 64),
        ent_f.UsageRollupFactory(user_id=UID),
        ent_f.UsageEventFactory(user_id=UID),
        ent_f.StripeWebhookEventFactory(),
        ent_f.ComputeOverageInvoiceFactory(user_id=UID),
        ent.D1StorageReconcileCursor.objects.get(),  # seeded singleton
        jobs_f.JobFactory(user_id=UID, claim_token=SECRET + "9"),
        jobs_f.ArchivedJobArtifactFactory(user_id=UID),
        jobs_f.JobsWorkerStateFactory(),
        se_f.SystemEmailThreadFactory(),
        message,
        se_f.SystemEmailAttachmentFactory(message=message),
        se_f.SystemEmailDeliveryEventFactory(
            message=message, storage_lease=SECRET + "10", finalization_token=SECRET + "11"
        ),
        se_f.SystemEmailDailyCounterFactory(),
        se.SystemEmailGraphAuthority.objects.get(),  # seeded singleton
        se.OperatorAlert.objects.create(key="auth_denial", active=True),
        f.AccountDeletionFactory(subject=owner),
    ]


def test_every_model_of_these_apps_is_registered(rows):
    covered = {type(row) for row in rows}
    mine = {model for model in _registered() if model.__module__.split(".")[-1] != "tokens"}
    assert mine == covered


@pytest.mark.parametrize("model", _registered(), ids=lambda model: model._meta.label)
def test_changelist_renders_without_credentials(staff, rows, model):
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    response = staff.get(url)
    assert response.status_code == 200
    assert SECRET not in response.content.decode()


def test_change_pages_render_without_credentials(staff, rows, owner):
    for row in rows:
        meta = row._meta
        url = reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[quote(row.pk)])
        response = staff.get(url)
        assert response.status_code == 200, meta.label
        html = response.content.decode()
        assert SECRET not in html, meta.label
    user_page = staff.get(reverse("admin:accounts_user_change", args=[owner.pk])).content
    assert owner.password.encode() not in user_page
    assert b"pbkdf2_sha256" not in user_page


def test_adding_a_user_in_admin_mints_the_stable_id(staff):
    response = staff.post(
        reverse("admin:accounts_user_add"),
        {
            "username": "added",
            "email": "Added@Example.com",
            "usable_password": "true",
            "password1": "pw-Added-123456",
            "password2": "pw-Added-123456",
        },
    )
    assert response.status_code == 302
    added = acc.User.objects.get(username="added")
    assert added.email == "added@example.com"
    assert len(added.stable_user_id) == 64


def test_triaging_feedback_records_the_reviewer(staff, operator, rows):
    feedback = acc.PlatformFeedback.objects.get()
    url = reverse("admin:accounts_platformfeedback_change", args=[feedback.pk])
    response = staff.post(url, {"status": "resolved", "admin_note": "fixed"})
    assert response.status_code == 302
    feedback.refresh_from_db()
    assert (feedback.status, feedback.reviewed_by_user_id, feedback.revision) == (
        "resolved",
        operator.stable_user_id,
        1,
    )
