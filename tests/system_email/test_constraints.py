"""Constraints of the system_email tables, enforced by Postgres."""

from __future__ import annotations

from datetime import date

import pytest
from django.db import connection

from apps.system_email import models as se
from tests.constraints import refuses
from tests.mailbox.factories import EmailInboxFactory
from tests.system_email.factories import (
    SystemEmailAttachmentFactory,
    SystemEmailDailyCounterFactory,
    SystemEmailDeliveryEventFactory,
    SystemEmailMessageFactory,
    SystemEmailThreadFactory,
)

pytestmark = pytest.mark.django_db


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
    refuses(lambda: SystemEmailMessageFactory(**extra))


def test_outbound_provider_message_ids_are_unique():
    sent = {"direction": "outbound", "processing_status": "sent", "provider_message_id": "p1"}
    SystemEmailMessageFactory(**sent)
    SystemEmailMessageFactory(provider_message_id="p1")  # only outbound rows are keyed
    refuses(lambda: SystemEmailMessageFactory(**sent))


def test_attachment_storage_kind_is_checked():
    message = SystemEmailMessageFactory()
    refuses(lambda: SystemEmailAttachmentFactory(message=message, storage_kind="inline"))


@pytest.mark.parametrize(
    "extra", [{"event_type": "opened"}, {"state": "stuck"}, {"subscription_effect_state": "gone"}]
)
def test_delivery_event_checks(extra):
    refuses(lambda: SystemEmailDeliveryEventFactory(**extra))


def test_provider_event_ids_are_unique_when_present():
    SystemEmailDeliveryEventFactory(provider_event_id="e1")
    SystemEmailDeliveryEventFactory()
    SystemEmailDeliveryEventFactory()
    refuses(lambda: SystemEmailDeliveryEventFactory(provider_event_id="e1"))


def test_one_counter_per_local_and_day():
    SystemEmailDailyCounterFactory(local_part="support", day=date(2026, 11, 1))
    SystemEmailDailyCounterFactory(local_part="abuse", day=date(2026, 11, 1))
    refuses(lambda: SystemEmailDailyCounterFactory(local_part="support", day=date(2026, 11, 1)))


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
    inbox = EmailInboxFactory(user_id="system:email", name="support")
    thread = SystemEmailThreadFactory(inbox=inbox)
    message = SystemEmailMessageFactory(inbox=inbox, thread=thread)
    attachment = SystemEmailAttachmentFactory(message=message)
    event = SystemEmailDeliveryEventFactory(message=message, inbox=inbox)
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
