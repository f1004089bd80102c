"""The hourly system_email_retention lane: 90 days, the 5,000-message cap, blobs first."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.mailbox.errors import BlobUnavailable
from apps.mailbox.services import blobstore, inbound
from apps.system_email import models as m
from apps.system_email.services import retention
from kody.blobs import bucket
from tests.mailbox.conftest import DOMAIN, simple_mail

pytestmark = pytest.mark.django_db


def receive(n: int, local: str = "support") -> m.SystemEmailMessage:
    result = inbound.deliver(simple_mail(f"Ticket {n}"), f"{local}@{DOMAIN}", f"s-{n}")
    return m.SystemEmailMessage.objects.get(id=result.message_id)


def age(msg: m.SystemEmailMessage, days: int) -> None:
    m.SystemEmailMessage.objects.filter(id=msg.id).update(
        created_at=timezone.now() - timedelta(days=days)
    )


def test_old_messages_go_blob_first_and_recent_ones_stay():
    old, recent = receive(1), receive(2)
    age(old, 91)
    call_command("run_lane", "system_email_retention")
    assert list(m.SystemEmailMessage.objects.values_list("id", flat=True)) == [recent.id]
    assert not bucket("email_blobs").exists(old.raw_mime_key)
    assert bucket("email_blobs").exists(recent.raw_mime_key)
    assert m.SystemEmailThread.objects.count() == 1  # the old message's thread was orphaned


def test_a_failed_blob_delete_keeps_the_rows_for_the_next_run(monkeypatch):
    old = receive(1)
    age(old, 91)
    monkeypatch.setattr(blobstore, "delete", lambda key: (_ for _ in ()).throw(BlobUnavailable()))
    batch = retention.prune_batch(100)
    assert (batch.messages, batch.blob_failures) == (0, 1)
    assert m.SystemEmailMessage.objects.filter(id=old.id).exists()
    monkeypatch.undo()
    assert retention.prune_batch(100).messages == 1


def test_the_cap_keeps_only_the_newest(monkeypatch):
    monkeypatch.setattr(retention, "MESSAGE_CAP", 2)
    first, second, third = receive(1), receive(2), receive(3)
    age(first, 3)
    age(second, 2)
    age(third, 1)
    retention.prune_batch(100)
    assert set(m.SystemEmailMessage.objects.values_list("id", flat=True)) == {second.id, third.id}


def test_old_events_and_stale_counters_are_pruned():
    receive(1)
    m.SystemEmailDeliveryEvent.objects.update(created_at=timezone.now() - timedelta(days=91))
    m.SystemEmailDailyCounter.objects.update(day=timezone.now().date() - timedelta(days=30))
    batch = retention.prune_batch(100)
    assert batch.events == 1 and batch.counters == 1
    assert m.SystemEmailMessage.objects.count() == 1
