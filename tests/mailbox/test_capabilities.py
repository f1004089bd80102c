"""The email capabilities for their owner: list, read, search, classify, delete, rules, usage,
send and reply (console/locmem backend), and the operator's maintenance view."""

from __future__ import annotations

import pytest
from django.core import mail

from apps.accounts.models import AuditEvent
from apps.mailbox.actor import Mailbox
from apps.mailbox.models import (
    EmailDeliveryAlertEvent,
    EmailOutboundProviderIndex,
    EmailOutboundProviderIndexRepairOwner,
)
from apps.mailbox.services import outbound
from tests.mailbox.conftest import DOMAIN, address, cap, deliver_cli, raw_blobs, simple_mail

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def receive(owner, n: int, subject: str | None = None, **kw) -> str:
    raw = simple_mail(subject or f"Note {n}", message_id=f"<n{n}@example.org>", **kw)
    return deliver_cli(raw, address(owner), f"c-{n}")["messageId"]


def test_list_pages_newest_first_with_an_opaque_cursor(owner, owner_key):
    ids = [receive(owner, n) for n in range(3)]
    first = cap(owner_key, "emailMessageList", {"limit": 2}).json()
    assert [m["id"] for m in first["messages"]] == [ids[2], ids[1]]
    assert {"id", "subject", "from", "receivedAt"} <= set(first["messages"][0])
    second = cap(owner_key, "emailMessageList", {"limit": 2, "cursor": first["nextCursor"]})
    assert [m["id"] for m in second.json()["messages"]] == [ids[0]]
    assert second.json()["nextCursor"] is None
    bad = cap(owner_key, "emailMessageList", {"cursor": "not-a-cursor"})
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_cursor"


def test_get_search_classify_and_events(owner, owner_key):
    wanted = receive(owner, 1, "Budget review", body="numbers inside\n")
    receive(owner, 2, "Lunch")
    got = cap(owner_key, "emailMessageGet", {"messageId": wanted}).json()["message"]
    assert got["textBody"] == "numbers inside\n" and got["attachments"] == []
    found = cap(owner_key, "emailMessageSearch", {"query": "budget"}).json()["messages"]
    assert [m["id"] for m in found] == [wanted]
    classified = cap(
        owner_key,
        "emailMessageClassify",
        {"messageId": wanted, "classification": "quarantined", "reason": "looks odd"},
    ).json()["message"]
    assert classified["classification"] == "quarantined"
    events = cap(owner_key, "emailDeliveryEventList", {"messageId": wanted}).json()["events"]
    assert [(e["eventType"], e["state"]) for e in events] == [("received", "received")]
    missing = cap(owner_key, "emailMessageGet", {"messageId": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "message_not_found"


def test_delete_removes_the_message_and_its_blob(owner, owner_key):
    gone = receive(owner, 1)
    response = cap(owner_key, "emailMessageDelete", {"messageId": gone})
    assert response.json() == {"deleted": True, "messageId": gone}
    assert cap(owner_key, "emailMessageList").json()["messages"] == []
    assert raw_blobs(owner) == []
    again = cap(owner_key, "emailMessageDelete", {"messageId": gone})
    assert again.status_code == 404


def test_sender_rules_round_trip_and_apply(owner, owner_key):
    made = cap(
        owner_key,
        "emailSenderRuleSet",
        {"kind": "domain", "value": "Spam.Test", "effect": "block"},
    ).json()["rule"]
    assert (made["kind"], made["value"], made["effect"]) == ("domain", "spam.test", "block")
    listed = cap(owner_key, "emailSenderRuleList").json()["rules"]
    assert [r["id"] for r in listed] == [made["id"]]
    blocked = deliver_cli(simple_mail(sender="x@spam.test"), address(owner), "r-1")
    assert blocked["reason"] == "sender_blocked"
    cap(owner_key, "emailSenderRuleDelete", {"ruleId": made["id"]})
    assert cap(owner_key, "emailSenderRuleList").json()["rules"] == []
    bad = cap(owner_key, "emailSenderRuleSet", {"kind": "address", "value": "nope",
                                                  "effect": "block"})  # fmt: skip
    assert bad.status_code == 422


def test_inboxes_and_usage(owner, owner_key):
    receive(owner, 1)
    inboxes = cap(owner_key, "emailInboxList").json()["inboxes"]
    assert [i["addresses"] for i in inboxes] == [[address(owner)]]
    usage = cap(owner_key, "emailUsageGet").json()
    assert usage["receivesPerDay"] == {"used": 1, "limit": 50}
    assert usage["storedMessages"] == {"used": 1, "limit": 500}
    assert usage["messageBytesLimit"] == 256 * 1024
    assert usage["address"] == address(owner)


def test_send_writes_the_mailbox_submits_and_indexes(owner, owner_key):
    response = cap(
        owner_key,
        "emailSend",
        {"to": ["Bob <bob@example.org>"], "subject": "Hi Bob", "text": "hello", "html": "<p>x</p>"},
    )
    assert response.status_code == 200, response.content
    sent = response.json()
    assert sent["status"] == "sent"
    [email] = mail.outbox
    assert email.to == ["Bob <bob@example.org>"] and email.from_email.endswith(f"@{DOMAIN}>")
    assert email.extra_headers["Message-ID"] == sent["providerMessageId"]
    got = cap(owner_key, "emailMessageGet", {"messageId": sent["messageId"]}).json()["message"]
    assert (got["direction"], got["processingStatus"]) == ("outbound", "sent")
    row = EmailOutboundProviderIndex.objects.get(message_id=sent["messageId"])
    assert row.user_id == owner.stable_user_id
    assert Mailbox.call(owner.stable_user_id, "count")["pendingIndexRepairs"] == 0
    events = cap(owner_key, "emailDeliveryEventList", {"messageId": sent["messageId"]})
    assert [e["eventType"] for e in events.json()["events"]] == ["sent", "send_requested"]

    assert outbound.record_provider_event("django", sent["providerMessageId"], "delivered", "e1")
    got = cap(owner_key, "emailMessageGet", {"messageId": sent["messageId"]}).json()["message"]
    assert got["deliveryStatus"] == "delivered" and got["processingStatus"] == "sent"
    assert not outbound.record_provider_event("django", "<unknown@x>", "delivered", "e2")
    assert outbound.record_provider_event("django", sent["providerMessageId"], "bounced", "e3")
    alert = EmailDeliveryAlertEvent.objects.get(provider_event_id="e3")
    assert alert.event_type == "bounced" and owner.stable_user_id not in alert.owner_hash


def test_a_failed_index_write_leaves_a_repair_and_never_resends(owner, owner_key, monkeypatch):
    def down(*args, **kwargs):
        raise RuntimeError("index down")

    monkeypatch.setattr(outbound, "write_provider_index", down)
    sent = cap(owner_key, "emailSend", {"to": ["b@example.org"], "subject": "s", "text": "t"})
    assert sent.json()["status"] == "sent" and len(mail.outbox) == 1
    assert Mailbox.call(owner.stable_user_id, "count")["pendingIndexRepairs"] == 1
    health = EmailOutboundProviderIndexRepairOwner.objects.get(user_id=owner.stable_user_id)
    assert health.pending_count == 1
    monkeypatch.undo()
    from django.db import connection

    from kody.userschema.naming import schema_name_for

    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".'
            "email_outbound_provider_index_repairs SET retry_at = now() - interval '1 minute'"
        )
    Mailbox.call(owner.stable_user_id, "run_retention_now")
    assert EmailOutboundProviderIndex.objects.filter(message_id=sent.json()["messageId"]).exists()
    assert Mailbox.call(owner.stable_user_id, "count")["pendingIndexRepairs"] == 0
    assert not EmailOutboundProviderIndexRepairOwner.objects.exists()
    assert len(mail.outbox) == 1


def test_only_verified_senders_send(owner, owner_key):
    denied = cap(
        owner_key,
        "emailSend",
        {"to": ["b@example.org"], "subject": "s", "text": "t", "from": "ceo@bank.test"},
    )
    assert denied.status_code == 403 and denied.json()["error"]["code"] == "sender_not_verified"
    assert mail.outbox == []


def test_the_send_limit_is_enforced(owner, owner_key):
    for _ in range(10):
        cap(owner_key, "emailSend", {"to": ["b@example.org"], "subject": "s", "text": "t"})
    over = cap(owner_key, "emailSend", {"to": ["b@example.org"], "subject": "s", "text": "t"})
    assert over.status_code == 429 and len(mail.outbox) == 10


def test_reply_threads_with_the_original(owner, owner_key):
    original = receive(owner, 1, "Question", sender="Ann <ann@example.org>")
    reply = cap(owner_key, "emailReply", {"messageId": original, "text": "Answer"}).json()
    [email] = mail.outbox
    assert email.to == ["Ann <ann@example.org>"] and email.subject == "Re: Question"
    assert email.extra_headers["In-Reply-To"] == "<n1@example.org>"
    threads = {
        m["id"]: m["threadId"] for m in cap(owner_key, "emailMessageList").json()["messages"]
    }
    assert threads[reply["messageId"]] == threads[original]


def test_operator_maintenance_is_content_free_and_audited(owner, operator_key):
    receive(owner, 1, "Very private subject")
    status = cap(
        operator_key,
        "adminMailboxMaintenance",
        {"action": "status", "userId": owner.stable_user_id},
    )
    assert status.status_code == 200
    assert status.json()["mailbox"]["messages"] == 1
    assert status.json()["userGraphAuthority"]["present"] is True
    # The delivery's due-owner hint exists, not yet due (its lease is fresh).
    assert (status.json()["inboundDueOwners"], status.json()["inboundDueOwnersDue"]) == (1, 0)
    assert "Very private subject" not in status.content.decode()
    retention = cap(
        operator_key,
        "adminMailboxMaintenance",
        {"action": "retention", "userId": owner.stable_user_id},
    ).json()
    assert retention["before"]["messages"] == retention["after"]["messages"] == 1
    assert AuditEvent.objects.using("audit").filter(action="adminMailboxMaintenance").exists()


def test_account_usage_counts_stored_messages_from_the_mailbox(owner, owner_key):
    receive(owner, 1)
    receive(owner, 2)
    usage = cap(owner_key, "accountUsage").json()
    used = {row["resource"]: row["used"] for row in usage["resources"]}
    assert used["stored_email_messages"] == 2
