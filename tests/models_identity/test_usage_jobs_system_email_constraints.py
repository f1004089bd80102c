"""Constraints of the entitlements, jobs and system_email tables, enforced by Postgres."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.entitlements import models as ent
from apps.jobs import models as jobs
from apps.mailbox.models import EmailInbox
from apps.system_email import models as se
from tests.models_identity.helpers import refuses

pytestmark = pytest.mark.django_db

UID = "a" * 64


# --- entitlements ----------------------------------------------------------------------------


def test_one_rollup_per_user_metric_and_month():
    ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-11")
    ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-12")
    refuses(lambda: ent.UsageRollup.objects.create(user_id=UID, metric="execute", month="2026-11"))


@pytest.mark.parametrize("month", ["2026-13", "202611", "2026-1", "Nov"])
def test_rollup_month_is_a_utc_month_key(month):
    refuses(lambda: ent.UsageRollup.objects.create(user_id=UID, metric="m", month=month))


def _overage(**extra) -> ent.ComputeOverageInvoice:
    fields = dict(
        user_id=UID,
        month="2026-11",
        unique_worker_days=3,
        unique_worker_day_cents=30,
        durable_object_rows_read=10,
        durable_object_rows_read_cents=1,
        total_cents=31,
        disposition="invoice",
        status="invoice",
    )
    return ent.ComputeOverageInvoice.objects.create(**{**fields, **extra})


def test_one_overage_row_per_user_per_month():
    _overage(stripe_customer_id="cus_1", stripe_invoice_id="in_1")
    _overage(month="2026-12", disposition="dry_run", status="dry_run")
    refuses(lambda: _overage(disposition="soft_block", status="soft_block"))


def test_only_invoice_rows_carry_a_stripe_invoice_id():
    refuses(
        lambda: _overage(disposition="skip_legacy", status="skip_legacy", stripe_invoice_id="in_2")
    )
    _overage(disposition="invoice", status="failed")  # a failed invoice attempt has no id yet


def test_stripe_event_ids_are_processed_once():
    ent.StripeWebhookEvent.objects.create(event_id="evt_1", event_type="invoice.paid")
    refuses(lambda: ent.StripeWebhookEvent.objects.create(event_id="evt_1", event_type="x"))


def test_storage_reconcile_cursor_is_a_seeded_singleton():
    assert ent.D1StorageReconcileCursor.objects.get().position == ""
    refuses(lambda: ent.D1StorageReconcileCursor.objects.create(singleton=2))


def test_usage_events_append():
    ent.UsageEvent.objects.create(user_id=UID, metric="execute", duration_ms=5, error=True)
    assert ent.UsageEvent.objects.filter(user_id=UID, error=True).count() == 1


# --- jobs ------------------------------------------------------------------------------------


def _job(**extra) -> jobs.Job:
    fields = dict(
        user_id=UID,
        name="nightly",
        source_id="src",
        storage_id="job:1",
        schedule_json={"type": "cron", "expression": "0 3 * * *"},
        timezone="UTC",
        caller_context_json={},
        next_run_at=timezone.now(),
    )
    return jobs.Job.objects.create(**{**fields, **extra})


def test_job_ids_are_unique_and_retry_count_nonnegative():
    _job(id="job-1")
    refuses(lambda: _job(id="job-1"))
    refuses(lambda: _job(id="job-2", retry_count=-1))


def test_an_archived_artifact_per_job():
    row = dict(
        user_id=UID,
        source_id="s",
        published_commit="c",
        storage_id="job:1",
        retain_until=timezone.now() + timedelta(days=30),
    )
    jobs.ArchivedJobArtifact.objects.create(job_id="job-1", **row)
    refuses(lambda: jobs.ArchivedJobArtifact.objects.create(job_id="job-1", **row))


def test_worker_state_key_is_unique():
    jobs.JobsWorkerState.objects.create(key="watchdog_cooldown", value="{}")
    refuses(lambda: jobs.JobsWorkerState.objects.create(key="watchdog_cooldown", value="{}"))


# --- system email ----------------------------------------------------------------------------


def _message(**extra) -> se.SystemEmailMessage:
    fields = dict(direction="inbound", from_address="a@x.io", processing_status="stored")
    return se.SystemEmailMessage.objects.create(**{**fields, **extra})


@pytest.mark.parametrize(
    "extra",
    [
        {"direction": "sideways"},
        {"processing_status": "queued"},
        {"delivery_status": "lost"},
        {"classification": "spam"},
    ],
)
def test_system_message_checks(extra):
    refuses(lambda: _message(**extra))


def test_outbound_provider_message_ids_are_unique():
    _message(direction="outbound", processing_status="sent", provider_message_id="p1")
    _message(direction="inbound", provider_message_id="p1")  # only outbound rows are keyed
    refuses(
        lambda: _message(direction="outbound", processing_status="sent", provider_message_id="p1")
    )


def test_attachment_storage_kind_is_checked():
    message = _message()
    refuses(
        lambda: se.SystemEmailAttachment.objects.create(
            message=message, content_type="text/plain", storage_kind="inline"
        )
    )


def _event(**extra) -> se.SystemEmailDeliveryEvent:
    return se.SystemEmailDeliveryEvent.objects.create(**{"event_type": "received", **extra})


@pytest.mark.parametrize(
    "extra", [{"event_type": "opened"}, {"state": "stuck"}, {"subscription_effect_state": "gone"}]
)
def test_delivery_event_checks(extra):
    refuses(lambda: _event(**extra))


def test_provider_event_ids_are_unique_when_present():
    _event(provider_event_id="e1")
    _event()
    _event()
    refuses(lambda: _event(provider_event_id="e1"))


def test_one_counter_per_local_and_day():
    se.SystemEmailDailyCounter.objects.create(local_part="support", day=date(2026, 11, 1))
    se.SystemEmailDailyCounter.objects.create(local_part="abuse", day=date(2026, 11, 1))
    refuses(
        lambda: se.SystemEmailDailyCounter.objects.create(
            local_part="support", day=date(2026, 11, 1)
        )
    )


def test_graph_authority_is_a_seeded_dedicated_marker():
    marker = se.SystemEmailGraphAuthority.objects.get()
    assert (marker.authority, marker.graph_mismatch_count, marker.provider_link_count) == (
        "dedicated",
        0,
        0,
    )
    refuses(lambda: se.SystemEmailGraphAuthority.objects.filter(pk=1).update(provider_link_count=1))
    refuses(lambda: se.SystemEmailGraphAuthority.objects.filter(pk=1).update(authority="shared"))
    refuses(lambda: se.SystemEmailGraphAuthority.objects.create(singleton=2))


def test_raw_deletes_follow_the_original_on_delete_actions():
    inbox = EmailInbox.objects.create(user_id="system:email", name="support")
    thread = se.SystemEmailThread.objects.create(inbox=inbox, last_message_at=timezone.now())
    message = _message(inbox=inbox, thread=thread)
    attachment = se.SystemEmailAttachment.objects.create(
        message=message, content_type="text/plain", storage_kind="raw-mime"
    )
    event = _event(message=message, inbox=inbox)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM email_inboxes WHERE id = %s", [inbox.pk])
        cursor.execute("DELETE FROM system_email_threads WHERE id = %s", [thread.pk])
    message.refresh_from_db()
    assert (message.inbox_id, message.thread_id) == (None, None)
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM system_email_messages WHERE id = %s", [message.pk])
    assert not se.SystemEmailAttachment.objects.filter(pk=attachment.pk).exists()
    event.refresh_from_db()
    assert (event.message_id, event.inbox_id) == (None, None)
