"""Inbound mail through the MTA pipe command and the provider webhook."""

from __future__ import annotations

from email.message import EmailMessage

import pytest
from django.db import connection
from django.test import Client

from apps.entitlements import services as entitlements
from apps.mailbox.actor import Mailbox
from apps.system_email.models import SystemEmailDailyCounter, SystemEmailMessage
from kody.blobs import bucket
from kody.blobs.keys import email_raw_key
from kody.userschema.naming import schema_name_for
from tests.mailbox.conftest import (
    DOMAIN,
    address,
    deliver_cli,
    raw_blobs,
    receives_today,
    simple_mail,
)
from tests.mailbox.factories import EmailSenderRuleFactory

pytestmark = pytest.mark.django_db


def messages(user) -> list[dict]:
    return Mailbox.call(user.stable_user_id, "list_messages", limit=100)["messages"]


def has_schema(user) -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema_name_for(user.stable_user_id)]
        )
        return cursor.fetchone() is not None


def test_a_delivered_message_lands_in_the_owners_mailbox_with_its_raw_mime(owner, outsider):
    raw = simple_mail("Quarterly numbers")
    result = deliver_cli(raw, address(owner), "d-1")

    assert result["status"] == "received" and result["reason"] is None
    [listed] = messages(owner)
    assert (listed["id"], listed["subject"], listed["from"]) == (
        result["messageId"],
        "Quarterly numbers",
        "Ada <ada@example.org>",
    )
    key = email_raw_key(owner.stable_user_id, result["messageId"])
    assert raw_blobs(owner) == [key]
    with bucket("email_blobs").open(key, "rb") as handle:
        assert handle.read() == raw
    assert receives_today(owner) == 1
    assert not has_schema(outsider)


def test_a_plus_tag_is_an_alias_even_when_it_spells_a_system_local(owner):
    result = deliver_cli(simple_mail(), address(owner, "postmaster"), "d-tag")
    assert result["status"] == "received"
    assert len(messages(owner)) == 1
    assert not SystemEmailMessage.objects.exists()


def test_the_address_is_case_insensitive_and_unknown_people_are_rejected(owner):
    assert deliver_cli(simple_mail(), address(owner).upper(), "d-case")["status"] == "received"
    rejected = deliver_cli(simple_mail(), f"nobody@{DOMAIN}", "d-nobody")
    assert rejected == {"status": "rejected", "messageId": None, "reason": "unknown_recipient"}
    other_domain = deliver_cli(simple_mail(), f"{owner.username}@elsewhere.test", "d-elsewhere")
    assert other_domain["status"] == "rejected"


def test_a_redelivered_id_is_a_duplicate_and_charges_once(owner):
    first = deliver_cli(simple_mail(), address(owner), "d-dup")
    second = deliver_cli(simple_mail(), address(owner), "d-dup")
    assert second == {"status": "duplicate", "messageId": first["messageId"], "reason": None}
    assert len(messages(owner)) == 1
    assert receives_today(owner) == 1


def test_without_a_delivery_id_the_same_bytes_are_deduplicated(owner):
    raw = simple_mail()
    assert deliver_cli(raw, address(owner))["status"] == "received"
    assert deliver_cli(raw, address(owner))["status"] == "duplicate"


def test_mail_above_25_mib_is_refused_for_good_and_audited(owner):
    raw = simple_mail(body="x" * (25 * 1024 * 1024 + 10))
    result = deliver_cli(raw, address(owner), "d-huge")
    assert result == {"status": "rejected", "messageId": None, "reason": "message_too_large"}
    assert messages(owner) == [] and raw_blobs(owner) == []
    assert receives_today(owner) == 0
    events = Mailbox.call(owner.stable_user_id, "list_delivery_events")["events"]
    assert [(e["eventType"], e["detail"]["reason"]) for e in events] == [
        ("rejected", "message_too_large")
    ]
    assert deliver_cli(raw, address(owner), "d-huge")["status"] == "rejected"


def test_mail_above_the_persist_cap_keeps_text_and_html_and_fits(owner):
    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "a@example.org", address(owner), "Big"
    msg.set_content("the text body\n")
    msg.add_alternative("<p>the html body</p>", subtype="html")
    msg.add_attachment(b"\x00" * (400 * 1024), maintype="application", subtype="zip",
                       filename="big.zip")  # fmt: skip
    result = deliver_cli(msg.as_bytes(), address(owner), "d-big")

    assert result["status"] == "received"
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=result["messageId"])
    assert got["textBody"] == "the text body\n"
    assert got["htmlBody"] == "<p>the html body</p>\n"
    assert [(a["filename"], a["storageKind"], a["size"]) for a in got["attachments"]] == [
        ("big.zip", "unavailable", 400 * 1024)
    ]
    # rawSize is the raw MIME kept (what the blob holds, and what the message weighs against
    # storage_bytes); the size it arrived with stays on its delivery event.
    key = email_raw_key(owner.stable_user_id, result["messageId"])
    assert got["rawSize"] == bucket("email_blobs").size(key) <= 256 * 1024
    events = Mailbox.call(owner.stable_user_id, "list_delivery_events")["events"]
    assert [e["detail"]["rawSize"] for e in events] == [len(msg.as_bytes())]


def test_the_daily_receive_limit_rejects_without_storing(owner):
    entitlements.consume(owner, "email_receives_per_day", 50)
    result = deliver_cli(simple_mail(), address(owner), "d-over")
    assert result == {"status": "rejected", "messageId": None, "reason": "daily_limit_reached"}
    assert messages(owner) == [] and raw_blobs(owner) == []


def test_sender_rules_block_or_quarantine(owner):
    EmailSenderRuleFactory(
        user_id=owner.stable_user_id, kind="address", value="spam@bad.test", effect="block"
    )
    EmailSenderRuleFactory(user_id=owner.stable_user_id, value="meh.test", effect="quarantine")
    blocked = deliver_cli(simple_mail(sender="spam@bad.test"), address(owner), "d-b")
    assert blocked["reason"] == "sender_blocked" and receives_today(owner) == 0
    held = deliver_cli(simple_mail(sender="x@meh.test"), address(owner), "d-q")
    [listed] = messages(owner)
    assert listed["id"] == held["messageId"] and listed["classification"] == "quarantined"


def test_an_address_rule_beats_its_domains_rule(owner, outsider):
    EmailSenderRuleFactory(user_id=owner.stable_user_id, value="bad.test", effect="block")
    EmailSenderRuleFactory(
        user_id=owner.stable_user_id, kind="address", value="friend@bad.test", effect="allow"
    )
    # Someone else's rule never applies to this mailbox.
    EmailSenderRuleFactory(
        user_id=outsider.stable_user_id, kind="address", value="ok@bad.test", effect="allow"
    )
    friend = deliver_cli(simple_mail(sender="Friend <friend@bad.test>"), address(owner), "d-f")
    assert friend["status"] == "received"
    other = deliver_cli(simple_mail(sender="ok@bad.test"), address(owner), "d-o")
    assert other["reason"] == "sender_blocked"
    [listed] = messages(owner)
    assert listed["id"] == friend["messageId"] and listed["classification"] == "accepted"


def test_reserved_locals_go_to_the_system_inbox_not_a_person(owner):
    result = deliver_cli(simple_mail("Abuse report"), f"abuse@{DOMAIN}", "d-sys")
    assert result["status"] == "received"
    stored = SystemEmailMessage.objects.get(id=result["messageId"])
    assert stored.subject == "Abuse report"
    assert bucket("email_blobs").exists(stored.raw_mime_key)
    assert SystemEmailDailyCounter.objects.get(local_part="abuse").count == 1
    assert deliver_cli(simple_mail(), f"abuse@{DOMAIN}", "d-sys")["status"] == "duplicate"
    assert SystemEmailDailyCounter.objects.get(local_part="abuse").count == 1
    assert not has_schema(owner)


def test_the_webhook_needs_the_shared_secret(owner):
    client = Client()
    url = f"/inbound/email?to={address(owner)}&deliveryId=w-1"
    denied = client.post(url, simple_mail(), content_type="message/rfc822")
    assert denied.status_code == 401
    wrong = client.post(
        url, simple_mail(), content_type="message/rfc822", HTTP_X_KODY_INBOUND_SECRET="nope"
    )
    assert wrong.status_code == 401
    assert not has_schema(owner)
    ok = client.post(
        url,
        simple_mail(),
        content_type="message/rfc822",
        HTTP_X_KODY_INBOUND_SECRET="inbound-secret-for-tests",
    )
    assert ok.status_code == 200 and ok.json()["status"] == "received"
    assert [m["id"] for m in messages(owner)] == [ok.json()["messageId"]]


def test_the_command_exits_non_zero_on_a_retryable_failure(owner, monkeypatch):
    from django.core.management.base import CommandError

    from apps.mailbox.errors import BlobUnavailable
    from apps.mailbox.services import blobstore

    def broken(key: str, data: bytes) -> None:
        raise BlobUnavailable()

    monkeypatch.setattr(blobstore, "put", broken)
    with pytest.raises(CommandError) as failure:
        deliver_cli(simple_mail(), address(owner), "d-retry")
    assert failure.value.returncode == 75
