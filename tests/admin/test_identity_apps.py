"""Every admin page of accounts/entitlements/jobs/system_email renders, and never a credential."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.contrib import admin
from django.contrib.admin.utils import quote
from django.urls import reverse
from django.utils import timezone

from apps.accounts import models as acc
from apps.entitlements import models as ent
from apps.jobs import models as jobs
from apps.system_email import models as se

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

MY_APPS = {"accounts", "entitlements", "jobs", "system_email"}
SECRET = "SENTINEL-credential-value"
SOON = timezone.now() + timedelta(hours=1)
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
    now = timezone.now()
    banner = acc.SiteBanner.objects.create(title="Maintenance")
    message = se.SystemEmailMessage.objects.create(
        direction="inbound", from_address="a@x.io", processing_status="stored"
    )
    return [
        owner,
        acc.UserEmailClaim.objects.get(user=owner),  # the cast holds its live claim
        acc.PasswordReset.objects.create(user=owner, token_hash=SECRET + "1", expires_at=SOON),
        acc.EmailVerification.objects.create(user=owner, token_hash=SECRET + "2", expires_at=SOON),
        acc.PendingEmailChange.objects.create(
            user=owner, token_hash=SECRET + "3", new_email="new@x.io", expires_at=SOON
        ),
        acc.PendingEmailClaimRelease.objects.create(
            user=owner, token_hash=SECRET + "4", email="old@x.io", expires_at=SOON
        ),
        acc.Verification.objects.create(
            type="2fa",
            target=str(owner.pk),
            secret=SECRET + "5",
            algorithm="SHA1",
            digits=6,
            period=30,
            char_set="0123456789",
        ),
        acc.Passkey.objects.create(
            id="cred-1",
            aaguid="0",
            public_key=SECRET + "6",
            user=owner,
            webauthn_user_handle="h",
            device_type="singleDevice",
            name="laptop",
        ),
        acc.OAuthConnection.objects.create(provider_name="github", provider_id="1", user=owner),
        acc.Invite.objects.create(code="welcome", created_by=owner),
        acc.UsernameRedirect.objects.create(old_username="old", user_id=UID),
        acc.AccountWriteLeaseRepair.objects.create(
            target_user_id=UID,
            repaired_by_user_id=UID,
            lease_token=SECRET + "7",
            lease_holder="job",
            lease_acquired_at=now,
            reason="stuck",
        ),
        acc.McpAgentSession.objects.create(do_id="do-1", user_id=UID),
        acc.AuditEvent.objects.create(category="auth", action="login", result="success"),
        acc.FeatureFlag.objects.create(key="beta"),
        acc.FeatureFlagUserOverride.objects.create(flag_key="beta", user=owner, enabled=True),
        acc.FeatureFlagExposureRollup.objects.create(
            flag_key="beta", user_id=UID, day=now.date(), enabled=True, source="eval"
        ),
        acc.PlatformOAuthApp.objects.create(
            slug="github",
            provider="github",
            client_id="cid",
            client_secret_encrypted=SECRET + "8",
            token_url="https://x.io/t",
            authorize_url="https://x.io/a",
            flow="confidential",
        ),
        banner,
        acc.SiteBannerDismissal.objects.create(banner=banner, user=owner),
        acc.PlatformProviderMark.objects.create(slug="github", label="GitHub"),
        acc.PlatformFeedback.objects.create(
            submitter_user_id=UID,
            category="bug",
            summary="Broken",
            details="d",
            submitter_username="u",
            submitter_email="u@x.io",
        ),
        acc.UserUsageCampaign.objects.create(
            user_id=UID, state="Activated", entered_at=now, last_evaluated_at=now, origin="event"
        ),
        acc.UserUsageCampaignSend.objects.create(
            user_id=UID, state="Activated", template="welcome", send_index=1
        ),
        acc.UserTipsEmailOptOut.objects.create(user_id=UID),
        acc.Referral.objects.create(referrer_stable_user_id=UID, referee_stable_user_id="b" * 64),
        ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-11"),
        ent.UsageEvent.objects.create(user_id=UID, metric="execute"),
        ent.StripeWebhookEvent.objects.create(event_id="evt_1", event_type="invoice.paid"),
        ent.ComputeOverageInvoice.objects.create(
            user_id=UID,
            month="2026-11",
            unique_worker_days=1,
            unique_worker_day_cents=1,
            durable_object_rows_read=1,
            durable_object_rows_read_cents=1,
            total_cents=2,
            disposition="dry_run",
            status="dry_run",
        ),
        ent.D1StorageReconcileCursor.objects.get(),
        jobs.Job.objects.create(
            id="job-1",
            user_id=UID,
            name="nightly",
            source_id="s",
            storage_id="job:1",
            schedule_json={},
            timezone="UTC",
            caller_context_json={},
            next_run_at=now,
            claim_token=SECRET + "9",
        ),
        jobs.ArchivedJobArtifact.objects.create(
            job_id="job-0",
            user_id=UID,
            source_id="s",
            published_commit="c",
            storage_id="job:0",
            retain_until=now,
        ),
        jobs.JobsWorkerState.objects.create(key="watchdog", value="{}"),
        se.SystemEmailThread.objects.create(subject_normalized="hello", last_message_at=now),
        message,
        se.SystemEmailAttachment.objects.create(
            message=message, content_type="text/plain", storage_kind="raw-mime"
        ),
        se.SystemEmailDeliveryEvent.objects.create(
            event_type="received",
            message=message,
            storage_lease=SECRET + "10",
            finalization_token=SECRET + "11",
        ),
        se.SystemEmailDailyCounter.objects.create(local_part="support", day=date(2026, 11, 1)),
        se.SystemEmailGraphAuthority.objects.get(),
        acc.AccountDeletion.objects.create(
            subject_user_id=owner.stable_user_id, subject_db_id=owner.pk, requested_by="operator"
        ),
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
