"""The Mailbox actor: owner identity, blob-key validation, export, purge and retention."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.accounts.actor_surfaces import actor_surfaces
from apps.mailbox.actor import Mailbox
from apps.mailbox.errors import BlobUnavailable, InvalidBlobKey
from apps.mailbox.models import EmailInboundDueOwner
from apps.mailbox.services import blobstore, inbound
from kody.actors import OwnerMismatch, is_deletion_safe
from kody.blobs.keys import email_attachment_key, email_raw_key
from kody.userschema.naming import schema_name_for
from tests.mailbox.conftest import address, raw_blobs, simple_mail

pytestmark = pytest.mark.django_db


def deliver(owner, n: int, **kw) -> str:
    raw = simple_mail(f"Message {n}", message_id=f"<m{n}@example.org>", **kw)
    return inbound.deliver(raw, address(owner), f"a-{n}").message_id


def age(owner, table: str, days: int, where: str = "true") -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".{table}'
            f" SET created_at = created_at - interval '{days} days' WHERE {where}"
        )


def test_the_mailbox_registers_its_deletion_and_export_hooks():
    surface = actor_surfaces()[Mailbox.name]
    assert (surface.purge, surface.export_pages, surface.blob_references) == (
        "purge",
        "export_pages",
        "blob_references",
    )
    for hook in ("purge", "export_pages", "blob_references"):
        assert is_deletion_safe(Mailbox, hook)
    assert not is_deletion_safe(Mailbox, "delete_message")


def test_a_graph_naming_another_users_blob_key_is_refused(owner, outsider):
    uid = owner.stable_user_id
    claim = Mailbox.call(
        uid, "claim_delivery", delivery_id="x", inbox_id="i", fingerprint="f", raw_size=1
    )
    lease = Mailbox.call(uid, "begin_storing", delivery_id="x")["lease"]
    crafted = {
        "id": claim["messageId"],
        "inbox_id": "i",
        "raw_mime_key": email_raw_key(outsider.stable_user_id, claim["messageId"]),
    }
    with pytest.raises(InvalidBlobKey):
        Mailbox.call(
            uid, "commit_inbound_graph", delivery_id="x", lease=lease, message=crafted,
            attachments=[],
        )  # fmt: skip
    assert Mailbox.call(uid, "count")["messages"] == 0


def test_a_tampered_owner_identity_refuses_every_call(owner):
    deliver(owner, 1)
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".mailbox_owner_identity'
            " SET owner_id = 'someone-else'"
        )
    with pytest.raises(OwnerMismatch):
        Mailbox.call(owner.stable_user_id, "list_messages")
    # The inbound calls read the owner with the ledger row (one statement): refused the same.
    with pytest.raises(OwnerMismatch):
        Mailbox.call(
            owner.stable_user_id, "claim_delivery", delivery_id="tampered", inbox_id="i",
            fingerprint="f", raw_size=1, stored_limit=10,
        )  # fmt: skip
    with pytest.raises(OwnerMismatch):
        Mailbox.call(
            owner.stable_user_id, "commit_inbound_graph", delivery_id="a-1", lease="l",
            message={}, attachments=[],
        )  # fmt: skip
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT count(*) FROM "{schema_name_for(owner.stable_user_id)}".email_delivery_events'
            " WHERE provider_event_id = 'tampered'"
        )
        assert cursor.fetchone()[0] == 0


def _identity(owner) -> list[tuple]:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT owner_id FROM "{schema_name_for(owner.stable_user_id)}".mailbox_owner_identity'
        )
        return cursor.fetchall()


def test_reading_an_untouched_mailbox_records_nothing_and_its_first_write_does(owner, outsider):
    uid = owner.stable_user_id
    assert Mailbox.call(uid, "list_messages") == {"messages": [], "nextCursor": None}
    assert Mailbox.call(uid, "count")["messages"] == 0
    assert _identity(owner) == []  # a read (ADR 0030) cannot write; nothing needed it yet
    deliver(owner, 1)
    assert _identity(owner) == [(uid,)]
    assert len(Mailbox.call(uid, "list_messages")["messages"]) == 1
    assert Mailbox.call(outsider.stable_user_id, "list_messages")["messages"] == []


def test_a_full_mailbox_refuses_a_new_delivery_and_remembers_why(owner):
    deliver(owner, 1)
    uid = owner.stable_user_id
    claim = {"inbox_id": "i", "fingerprint": "f", "raw_size": 1}
    assert Mailbox.call(uid, "claim_delivery", delivery_id="room", stored_limit=2, **claim)[
        "outcome"
    ] == "claimed"  # fmt: skip
    for delivery_id, limit in (("full", 1), ("none-allowed", 0)):
        answer = Mailbox.call(
            uid, "claim_delivery", delivery_id=delivery_id, stored_limit=limit, **claim
        )
        assert answer == {"outcome": "rejected", "reason": "mailbox_full"}
        # A replay answers the recorded refusal, whatever the limit is now.
        again = Mailbox.call(
            uid, "claim_delivery", delivery_id=delivery_id, stored_limit=100, **claim
        )
        assert again == answer


def test_blob_references_export_and_purge(owner):
    ids = sorted(deliver(owner, n) for n in range(3))
    uid = owner.stable_user_id
    refs, cursor = [], None
    while True:
        page = Mailbox.call(uid, "blob_references", cursor=cursor, limit=2)
        refs += page["references"]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(r["key"] for r in refs) == [email_raw_key(uid, i) for i in ids]

    sections: dict[str, int] = {}
    cursor = None
    while True:
        page = Mailbox.call(uid, "export_pages", cursor=cursor, limit=2)
        sections[page["section"]] = sections.get(page["section"], 0) + len(page["rows"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sections == {"threads": 3, "messages": 3, "attachments": 0, "delivery_events": 3}

    purged = Mailbox.call(uid, "purge")
    assert purged["deleted"]["email_messages"] == 3
    assert Mailbox.call(uid, "count")["messages"] == 0
    assert len(raw_blobs(owner)) == 3  # purge never deletes blobs; deletion did that first


def _commit_with_attachments(uid: str, delivery: str, externals: int) -> str:
    """A committed inbound graph with ``externals`` external and one raw-mime attachment."""
    claim = Mailbox.call(
        uid, "claim_delivery", delivery_id=delivery, inbox_id="i", fingerprint="f", raw_size=1
    )
    message_id = claim["messageId"]
    lease = Mailbox.call(uid, "begin_storing", delivery_id=delivery)["lease"]
    attachments = [
        {
            "id": f"{delivery}-att{n}",
            "content_type": "application/pdf",
            "storage_kind": "external",
            "storage_key": email_attachment_key(uid, message_id, f"{delivery}-att{n}"),
        }
        for n in range(externals)
    ]
    attachments.append(
        {"id": f"inline-{delivery}", "content_type": "text/plain", "storage_kind": "raw-mime"}
    )
    message = {"id": message_id, "inbox_id": "i", "raw_mime_key": email_raw_key(uid, message_id)}
    Mailbox.call(
        uid, "commit_inbound_graph", delivery_id=delivery, lease=lease, message=message,
        attachments=attachments,
    )  # fmt: skip
    return message_id


def test_blob_references_name_external_attachments_on_every_page(owner, outsider):
    uid = owner.stable_user_id
    ids = [_commit_with_attachments(uid, f"d{n}", externals=n) for n in range(4)]
    _commit_with_attachments(outsider.stable_user_id, "theirs", externals=2)
    refs, cursor, pages = [], None, 0
    while True:
        page = Mailbox.call(uid, "blob_references", cursor=cursor, limit=3)
        refs += [r["key"] for r in page["references"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == 2
    expected = [email_raw_key(uid, i) for i in ids] + [
        email_attachment_key(uid, i, f"d{n}-att{a}") for n, i in enumerate(ids) for a in range(n)
    ]
    # Raw MIME and each external attachment once; raw-mime attachments live inside the raw MIME.
    assert sorted(refs) == sorted(expected) and len(refs) == 4 + 0 + 1 + 2 + 3


def test_delete_message_removes_blob_then_rows(owner, monkeypatch):
    keep, gone = deliver(owner, 1), deliver(owner, 2)
    uid = owner.stable_user_id
    monkeypatch.setattr(blobstore, "delete", lambda key: (_ for _ in ()).throw(BlobUnavailable()))
    with pytest.raises(BlobUnavailable):
        Mailbox.call(uid, "delete_message", message_id=gone)
    assert Mailbox.call(uid, "count")["messages"] == 2  # a failed blob delete keeps the row
    monkeypatch.undo()
    Mailbox.call(uid, "delete_message", message_id=gone)
    assert [m["id"] for m in Mailbox.call(uid, "list_messages")["messages"]] == [keep]
    assert raw_blobs(owner) == [email_raw_key(uid, keep)]


def test_retention_deletes_old_mail_blob_first_and_a_failing_blob_does_not_block(
    owner, monkeypatch
):
    uid = owner.stable_user_id
    stuck, old, fresh = deliver(owner, 1), deliver(owner, 2), deliver(owner, 3)
    age(owner, "email_messages", 400, f"id IN ('{stuck}', '{old}')")
    age(owner, "email_messages", 1, f"id = '{stuck}'")  # the oldest one
    real_delete = blobstore.delete

    def delete(key: str) -> None:
        if key == email_raw_key(uid, stuck):
            raise BlobUnavailable()
        real_delete(key)

    monkeypatch.setattr(blobstore, "delete", delete)
    result = Mailbox.call(uid, "run_retention_now")
    assert result["blobDeleteFailures"] == 1
    left = {m["id"] for m in Mailbox.call(uid, "list_messages")["messages"]}
    assert left == {stuck, fresh}
    assert raw_blobs(owner) == sorted([email_raw_key(uid, stuck), email_raw_key(uid, fresh)])
    assert Mailbox.call(uid, "count")["retentionRetries"] == 1
    assert Mailbox.call(uid, "count")["threads"] == 2  # the deleted message's thread is pruned

    # The retry waits an hour; a second pass now skips it instead of failing again.
    again = Mailbox.call(uid, "run_retention_now")
    assert again["blobDeleteFailures"] == 0


def test_retention_prunes_delivery_events_after_90_days(owner):
    deliver(owner, 1)
    uid = owner.stable_user_id
    age(owner, "email_delivery_events", 91)
    Mailbox.call(uid, "run_retention_now")
    assert Mailbox.call(uid, "count")["deliveryEvents"] == 0
    assert Mailbox.call(uid, "count")["messages"] == 1


def alarm_at(owner):
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT at FROM "{schema_name_for(owner.stable_user_id)}".actor_alarms'
            " WHERE actor = %s",
            [Mailbox.name],
        )
        found = cursor.fetchone()
    return found[0] if found else None


def test_a_delivery_leaves_a_due_hint_and_its_visit_schedules_the_next_retention(owner):
    deliver(owner, 1)
    hint = EmailInboundDueOwner.objects.get(user_id=owner.stable_user_id)
    assert timezone.now() < hint.due_at <= timezone.now() + timedelta(hours=1, minutes=1)
    assert alarm_at(owner) is None  # nothing stale can exist before the hint is due
    Mailbox.call(owner.stable_user_id, "reconcile_inbound")  # the lane's visit
    assert not EmailInboundDueOwner.objects.exists()  # nothing left mid-way
    # Next due: the 90-day delivery-event expiry (before the message's 365 days).
    due = alarm_at(owner) - timezone.now()
    assert timedelta(days=89) < due <= timedelta(days=90)
    with connection.cursor() as cursor:  # the alarm fires: the clock deletes its row first
        cursor.execute(f'DELETE FROM "{schema_name_for(owner.stable_user_id)}".actor_alarms')
    Mailbox.call(owner.stable_user_id, "run_retention_now")
    due = alarm_at(owner) - timezone.now()
    assert timedelta(days=89) < due <= timedelta(days=90)
