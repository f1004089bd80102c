"""Another person can never read, list, search, export or delete someone's mail: not through
any capability (REST or MCP), not with a crafted message id, attachment id or blob key."""

from __future__ import annotations

import json

import pytest
from django.core import mail

from apps.accounts.services.tokens import create_token
from apps.mailbox.actor import Mailbox
from kody.capabilities import all_capabilities
from kody.mcp.server import _invoke as mcp_invoke
from tests.mailbox.conftest import address, cap, deliver_cli, raw_blobs
from tests.mailbox.factories import EmailSenderRuleFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SECRET = "Merger plans for Q3"

# Every mailbox capability needs a cross-user test here; a new one fails this list.
COVERED = {
    "emailInboxList",
    "emailMessageList",
    "emailMessageGet",
    "emailMessageSearch",
    "emailAttachmentGet",
    "emailDeliveryEventList",
    "emailMessageClassify",
    "emailMessageDelete",
    "emailSenderRuleList",
    "emailSenderRuleSet",
    "emailSenderRuleDelete",
    "emailUsageGet",
    "emailSend",
    "emailReply",
    "adminMailboxMaintenance",
}


@pytest.fixture
def owners_mail(owner) -> dict:
    from email.message import EmailMessage

    msg = EmailMessage()
    msg["From"], msg["To"], msg["Subject"] = "cfo@corp.test", address(owner), SECRET
    msg.set_content(f"{SECRET}: details")
    msg.add_attachment(b"secret-bytes", maintype="application", subtype="pdf", filename="p.pdf")
    result = deliver_cli(msg.as_bytes(), address(owner), "iso-1")
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=result["messageId"])
    return {"id": result["messageId"], "attachment": got["attachments"][0]["id"]}


def test_every_mailbox_capability_has_an_isolation_test():
    declared = {
        c.name for c in all_capabilities() if c.handler.__module__ == "apps.mailbox.capabilities"
    }
    assert declared == COVERED


def test_outsider_cannot_read_or_download_the_owners_message(owners_mail, outsider_key):
    for name, payload in [
        ("emailMessageGet", {"messageId": owners_mail["id"]}),
        (
            "emailAttachmentGet",
            {"messageId": owners_mail["id"], "attachmentId": owners_mail["attachment"]},
        ),  # fmt: skip
        ("emailDeliveryEventList", {"messageId": owners_mail["id"]}),
    ]:
        response = cap(outsider_key, name, payload)
        assert response.status_code == 404, name
        assert response.json()["error"]["code"] == "message_not_found"
        assert SECRET not in response.content.decode()


def test_outsider_lists_and_searches_only_their_own_empty_mailbox(
    owners_mail, outsider, outsider_key
):
    assert cap(outsider_key, "emailMessageList").json()["messages"] == []
    found = cap(outsider_key, "emailMessageSearch", {"query": "Merger"}).json()
    assert found["messages"] == []
    assert cap(outsider_key, "emailDeliveryEventList").json()["events"] == []
    inboxes = cap(outsider_key, "emailInboxList").json()["inboxes"]
    assert [i["addresses"] for i in inboxes] == [[address(outsider)]]
    usage = cap(outsider_key, "emailUsageGet").json()
    assert usage["receivesPerDay"]["used"] == 0 and usage["storedMessages"]["used"] == 0


def test_outsider_cannot_classify_delete_or_reply(owner, owners_mail, outsider_key):
    classify = cap(
        outsider_key,
        "emailMessageClassify",
        {"messageId": owners_mail["id"], "classification": "quarantined"},
    )
    delete = cap(outsider_key, "emailMessageDelete", {"messageId": owners_mail["id"]})
    reply = cap(outsider_key, "emailReply", {"messageId": owners_mail["id"], "text": "hi"})
    assert classify.status_code == delete.status_code == reply.status_code == 404
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=owners_mail["id"])
    assert got["classification"] == "accepted"
    assert len(raw_blobs(owner)) == 1
    assert mail.outbox == []


def test_outsider_cannot_send_as_the_owner(owner, outsider_key):
    response = cap(
        outsider_key,
        "emailSend",
        {"to": ["x@example.org"], "subject": "s", "text": "t", "from": address(owner)},
    )
    assert response.status_code == 403 and mail.outbox == []


def test_sender_rules_are_per_person(owner, outsider_key):
    rule = EmailSenderRuleFactory(user_id=owner.stable_user_id, value="x.test", effect="block")
    assert cap(outsider_key, "emailSenderRuleList").json()["rules"] == []
    response = cap(outsider_key, "emailSenderRuleDelete", {"ruleId": rule.id})
    assert response.status_code == 404
    cap(outsider_key, "emailSenderRuleSet", {"kind": "domain", "value": "x.test",
                                               "effect": "allow"})  # fmt: skip
    rule.refresh_from_db()
    assert rule.effect == "block"


@pytest.mark.parametrize("name", sorted(COVERED - {"adminMailboxMaintenance"}))
def test_no_capability_takes_a_user_id(name, owner, outsider_key):
    response = cap(outsider_key, name, {"userId": owner.stable_user_id})
    assert response.status_code == 422


def test_only_operators_run_maintenance(owner, owners_mail, outsider_key):
    for action in ("status", "retention", "delete"):
        response = cap(
            outsider_key,
            "adminMailboxMaintenance",
            {"action": action, "userId": owner.stable_user_id, "messageId": owners_mail["id"]},
        )
        assert response.status_code == 403
    assert Mailbox.call(owner.stable_user_id, "count")["messages"] == 1


def test_mcp_gives_the_outsider_nothing_either(owner, owners_mail, outsider):
    token, _raw = create_token(outsider, "outsider agent", enforce_rate_limit=False)
    listed = mcp_invoke(token.pk, "emailMessageList", {}, None)
    assert listed["messages"] == []
    from kody.errors import KodyError

    for name, args in [
        ("emailMessageGet", {"messageId": owners_mail["id"]}),
        ("emailMessageDelete", {"messageId": owners_mail["id"]}),
    ]:
        with pytest.raises(KodyError) as denied:
            mcp_invoke(token.pk, name, args, None)
        assert denied.value.status == 404
        assert SECRET not in json.dumps(denied.value.as_dict())
    assert Mailbox.call(owner.stable_user_id, "count")["messages"] == 1


def test_export_and_blob_references_hold_only_the_callers_mail(owner, owners_mail, outsider):
    refs = Mailbox.call(outsider.stable_user_id, "blob_references")["references"]
    assert refs == []
    page = Mailbox.call(outsider.stable_user_id, "export_pages", limit=500)
    while page["next_cursor"]:
        assert page["rows"] == []
        page = Mailbox.call(outsider.stable_user_id, "export_pages", cursor=page["next_cursor"])
    assert page["rows"] == []
    owner_refs = Mailbox.call(owner.stable_user_id, "blob_references")["references"]
    assert all(owner.stable_user_id in r["key"] for r in owner_refs) and len(owner_refs) == 1
