"""Constraints of the system_email tables, enforced by Postgres."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection
from django.utils import timezone

from apps.mailbox.models import EmailInbox
from apps.system_email import models as se
from tests.constraints import refuses

pytestmark = pytest.mark.django_db


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
