"""Mail counts against storage_bytes: a kept inbound message and a stored sent one reserve what
they weigh (kept raw MIME, subject and bodies), a delivery or send over the limit is refused
with nothing stored, deletes and retention give the bytes back, and the nightly
reconciliation measures exactly what the writers kept."""

from __future__ import annotations

from datetime import timedelta
from email.message import EmailMessage
from typing import Any

import pytest
from django.core import mail
from django.db import connection
from django.test import Client
from django.utils import timezone

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.entitlements.services.enforcement import current_use
from apps.mailbox.actor import Mailbox
from apps.mailbox.models import EmailInboundDueOwner
from apps.mailbox.services import inbound
from kody.blobs import bucket
from kody.blobs.keys import email_raw_key
from kody.outbox.models import OutboxMessage
from kody.userschema.naming import schema_name_for
from tests.mailbox.conftest import address, cap, raw_blobs, receives_today, simple_mail

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SEND = {"to": ["bob@example.org"], "subject": "Søndag", "text": "hello " * 50}


def stored(user) -> int:  # type: ignore[no-untyped-def]
    return int(metering.read_storage_bytes(user.stable_user_id)["bytes"])


def fill_to(user, room: int) -> None:  # type: ignore[no-untyped-def]
    """Reserve everything but ``room`` bytes of the person's plan."""
    limit = limit_for(user.plan, "storage_bytes")
    used = int(current_use(user.stable_user_id, "storage_bytes") or 0)
    metering.reserve_storage_bytes(user.stable_user_id, limit - used - room, limit)


def messages(user) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    return Mailbox.call(user.stable_user_id, "list_messages", limit=100)["messages"]


def weight_of(user, message_id: str) -> int:  # type: ignore[no-untyped-def]
    """What the message weighs, measured from what is stored: its raw blob (if any) and the
    UTF-8 bytes of its subject and bodies."""
    got = Mailbox.call(user.stable_user_id, "get_message", message_id=message_id)
    blob = 0
    if got["direction"] == "inbound":
        blob = bucket("email_blobs").size(email_raw_key(user.stable_user_id, message_id))
    assert got["rawSize"] == blob
    text = [got["subject"], got["textBody"], got["htmlBody"]]
    return blob + sum(len(t.encode()) for t in text if t)


def reconcile(user) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return metering.reconcile_storage_bytes(user.stable_user_id)


def warm(user, key: str | None = None) -> None:  # type: ignore[no-untyped-def]
    """A first delivery (and with ``key`` a first send) makes the inbox's and the sender
    identity's public rows, which no mail write reserves; reconcile, so the meter starts from
    the measure and what follows is the mail's own weight."""
    inbound.deliver(simple_mail("warm", message_id="<warm@x>"), address(user), "warm")
    if key is not None:
        sent = cap(key, "emailSend", SEND).json()
        Mailbox.call(user.stable_user_id, "delete_message", message_id=sent["messageId"])
    reconcile(user)


def test_a_kept_inbound_message_reserves_exactly_its_weight(owner):
    warm(owner)
    before = stored(owner)
    outcome = inbound.deliver(simple_mail("Grüße", body="ü" * 300), address(owner), "in-1")
    assert outcome.status == "received"
    assert stored(owner) - before == weight_of(owner, outcome.message_id) > 600


def test_mail_reduced_past_the_cap_weighs_what_is_kept_not_what_arrived(owner):
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.org", address(owner), "Big"
    msg.set_content("the text body\n")
    msg.add_attachment(b"\x01" * (400 * 1024), maintype="application", subtype="zip",
                       filename="big.zip")  # fmt: skip
    warm(owner)
    before = stored(owner)
    outcome = inbound.deliver(msg.as_bytes(), address(owner), "in-big")
    assert outcome.status == "received"
    grown = stored(owner) - before
    assert grown == weight_of(owner, outcome.message_id) < 4096 < len(msg.as_bytes())


def test_inbound_over_the_limit_is_refused_for_good_with_nothing_stored(owner):
    warm(owner)
    fill_to(owner, 100)
    before, receives = stored(owner), receives_today(owner)
    blobs = raw_blobs(owner)
    response = Client().post(
        f"/inbound/email?to={address(owner)}&deliveryId=in-full",
        data=simple_mail("Too much", body="x" * 2000, message_id="<full@x>"),
        content_type="message/rfc822",
        HTTP_X_KODY_INBOUND_SECRET="inbound-secret-for-tests",
    )
    # A terminal answer (200, rejected), not a 503 the provider would retry.
    assert response.status_code == 200
    assert response.json() == {
        "status": "rejected",
        "messageId": None,
        "reason": "storage_limit_reached",
    }
    assert [m["subject"] for m in messages(owner)] == ["warm"]
    assert raw_blobs(owner) == blobs  # no blob for the refused message
    assert stored(owner) == before and receives_today(owner) == receives  # nor a charge
    # A redelivery gets the same refusal and still stores and charges nothing.
    again = inbound.deliver(simple_mail("Too much", body="x" * 2000), address(owner), "in-full")
    assert (again.status, again.reason) == ("rejected", "storage_limit_reached")
    assert stored(owner) == before and raw_blobs(owner) == blobs
    events = Mailbox.call(owner.stable_user_id, "list_delivery_events")["events"]
    assert ("rejected", "storage_limit_reached") in [
        (e["eventType"], e["detail"].get("reason")) for e in events
    ]


def test_inbound_just_within_the_limit_is_kept(owner):
    warm(owner)
    raw = simple_mail("Fits", body="y" * 500, message_id="<fits@x>")
    probe = inbound.deliver(raw, address(owner), "probe")
    weight = weight_of(owner, probe.message_id)
    Mailbox.call(owner.stable_user_id, "delete_message", message_id=probe.message_id)
    fill_to(owner, weight)
    assert inbound.deliver(raw, address(owner), "exact").status == "received"
    assert stored(owner) == limit_for(owner.plan, "storage_bytes")


def test_a_send_reserves_its_weight_and_over_the_limit_is_refused_with_nothing_sent(
    owner, owner_key
):
    warm(owner, owner_key)
    before = stored(owner)
    sent = cap(owner_key, "emailSend", SEND)
    assert sent.status_code == 200 and sent.json()["status"] == "sent"
    assert stored(owner) - before == weight_of(owner, sent.json()["messageId"]) > 300
    assert reconcile(owner)["previous"] == reconcile(owner)["bytes"] == stored(owner)

    fill_to(owner, 100)
    before, outbox, sends = stored(owner), len(mail.outbox), OutboxMessage.objects.count()
    refused = cap(owner_key, "emailSend", SEND)
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert len(mail.outbox) == outbox and OutboxMessage.objects.count() == sends
    assert len([m for m in messages(owner) if m["direction"] == "outbound"]) == 1  # the first
    assert stored(owner) == before
    usage = cap(owner_key, "emailUsageGet").json()
    assert usage["sendsPerDay"]["used"] == 2  # warm-up and first; the refused one given back


def test_deleting_a_message_gives_its_bytes_back(owner, owner_key):
    warm(owner, owner_key)
    before = stored(owner)
    kept = inbound.deliver(simple_mail("Keep", body="k" * 800), address(owner), "del-1")
    sent = cap(owner_key, "emailSend", SEND).json()
    grown = stored(owner) - before
    assert grown == weight_of(owner, kept.message_id) + weight_of(owner, sent["messageId"])

    assert cap(owner_key, "emailMessageDelete", {"messageId": kept.message_id}).status_code == 200
    assert cap(owner_key, "emailMessageDelete", {"messageId": sent["messageId"]}).status_code == 200
    assert stored(owner) == before
    assert reconcile(owner)["previous"] == reconcile(owner)["bytes"] == before


def test_retention_gives_the_bytes_of_expired_mail_back(owner):
    warm(owner)
    before = stored(owner)
    old = inbound.deliver(simple_mail("Old", message_id="<old@x>"), address(owner), "old")
    weight = weight_of(owner, old.message_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".email_messages'
            " SET created_at = created_at - interval '400 days' WHERE id = %s",
            [old.message_id],
        )
    assert stored(owner) == before + weight
    Mailbox.call(owner.stable_user_id, "run_retention_now")
    assert [m["subject"] for m in messages(owner)] == ["warm"]
    assert stored(owner) == before
    assert reconcile(owner)["previous"] == before


def test_reconciliation_measures_what_the_writers_reserved(owner, owner_key):
    before = stored(owner)
    for n in range(3):
        raw = simple_mail(f"R{n}", body="é" * (100 * n + 1), message_id=f"<r{n}@x>")
        assert inbound.deliver(raw, address(owner), f"rec-{n}").status == "received"
    cap(owner_key, "emailSend", {**SEND, "html": "<p>ß</p>"})
    # The first delivery also made the inbox's public rows, which nothing reserves; the
    # reconciliation counts them, and then leaves the meter where the mail writes put it.
    first = reconcile(owner)
    assert first["bytes"] >= first["previous"] > before
    more = inbound.deliver(simple_mail("More", message_id="<more@x>"), address(owner), "rec-9")
    assert more.status == "received"
    after = stored(owner)
    again = reconcile(owner)
    assert again["previous"] == again["bytes"] == after


def test_a_mailbox_never_created_adds_nothing_to_reconciliation(outsider):
    assert reconcile(outsider)["bytes"] == 0


def test_an_abandoned_delivery_gives_its_held_bytes_back(owner, monkeypatch):
    warm(owner)
    before = stored(owner)
    real = inbound._mailbox

    def dies_at_commit(uid: str, name: str, **kwargs: Any) -> Any:
        if name == "commit_inbound_graph":
            raise RuntimeError("worker died")
        return real(uid, name, **kwargs)

    monkeypatch.setattr(inbound, "_mailbox", dies_at_commit)
    with pytest.raises(inbound.InboundRetry):
        inbound.deliver(simple_mail("Lost", message_id="<lost@x>"), address(owner), "lost")
    monkeypatch.undo()
    assert stored(owner) > before  # held while the delivery may still be retried
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".email_delivery_events'
            " SET reconcile_after = %s WHERE provider_event_id = 'lost'",
            [timezone.now() - timedelta(minutes=1)],
        )
    EmailInboundDueOwner.objects.filter(user_id=owner.stable_user_id).update(
        due_at=timezone.now() - timedelta(minutes=1)
    )
    Mailbox.call(owner.stable_user_id, "reconcile_inbound")
    assert stored(owner) == before  # cleaned as an orphan: its blob and its bytes are gone
    # The sender's retry holds them again and lands the message once.
    retried = inbound.deliver(simple_mail("Lost", message_id="<lost@x>"), address(owner), "lost")
    assert retried.status == "received"
    assert stored(owner) == before + weight_of(owner, retried.message_id)
    assert reconcile(owner)["previous"] == stored(owner)


def test_one_persons_mail_leaves_another_persons_meter_alone(owner, outsider, owner_key):
    warm(outsider)
    theirs = stored(outsider)
    warm(owner)
    inbound.deliver(simple_mail("Mine", body="m" * 900), address(owner), "iso-1")
    sent = cap(owner_key, "emailSend", SEND).json()
    Mailbox.call(owner.stable_user_id, "delete_message", message_id=sent["messageId"])
    reconcile(owner)
    assert stored(outsider) == theirs
    # And the outsider's reconciliation does not count the owner's mail.
    assert reconcile(outsider)["bytes"] == theirs
    # An outsider at their limit is refused; the owner's mail still arrives.
    fill_to(outsider, 10)
    refused = inbound.deliver(simple_mail("No room"), address(outsider), "iso-2")
    assert refused.reason == "storage_limit_reached"
    assert inbound.deliver(simple_mail("Room"), address(owner), "iso-3").status == "received"


def test_a_commit_weighing_other_than_its_claim_held_leaves_the_meter_at_what_is_stored(owner):
    """A retried delivery reduced under a changed cap may weigh otherwise than its first claim
    held: the commit moves the meter by the difference, so it follows the stored rows."""
    warm(owner)
    uid, before = owner.stable_user_id, stored(owner)
    claim = Mailbox.call(
        uid, "claim_delivery", delivery_id="drift", inbox_id="i", fingerprint="f", raw_size=9,
        storage={"bytes": 5, "limit": 10**9},
    )  # fmt: skip
    assert stored(owner) == before + 5
    lease = Mailbox.call(uid, "begin_storing", delivery_id="drift")["lease"]
    message_id = claim["messageId"]
    message = {
        "id": message_id,
        "inbox_id": "i",
        "raw_mime_key": email_raw_key(uid, message_id),
        "raw_size": 40,
        "subject": "ab",
        "text_body": "xyz",
    }
    Mailbox.call(
        uid, "commit_inbound_graph", delivery_id="drift", lease=lease, message=message,
        attachments=[],
    )  # fmt: skip
    assert stored(owner) == before + 45
    assert reconcile(owner)["previous"] == before + 45


def test_system_mail_is_the_operators_and_meters_no_one(owner):
    warm(owner)
    fill_to(owner, 0)
    before = stored(owner)
    outcome = inbound.deliver(simple_mail("Report", body="a" * 900), "abuse@mail.test", "sys-1")
    assert outcome.status == "received"
    assert stored(owner) == before
