"""Operator capabilities over the system mailbox: read, send, and its sender rules. An operator
succeeds and is audited (intent first), a user gets 403 and changes nothing, and lists carry no
message body."""

from __future__ import annotations

import pytest
from django.core import mail
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent
from apps.accounts.services.tokens import create_token
from apps.mailbox.models import SYSTEM_EMAIL_OWNER, EmailSenderRule
from apps.mailbox.services import inbound
from apps.system_email import models as m
from tests.cast import bearer
from tests.mailbox.conftest import DOMAIN, simple_mail

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def operator_raw(operator) -> str:
    return create_token(operator, "operator laptop", enforce_rate_limit=False)[1]


@pytest.fixture
def owner_raw(owner) -> str:
    return create_token(owner, "owner laptop", enforce_rate_limit=False)[1]


def audited(name: str) -> list[str]:
    return [
        a
        for a in AuditEvent.objects.order_by("pk").values_list("action", flat=True)
        if a in (name, f"{name}:intent")
    ]


def receive(subject: str, sender: str = "ann@example.org", n: int = 1) -> str:
    got = inbound.deliver(
        simple_mail(subject, sender=sender), f"support@{DOMAIN}", f"sys-{subject}-{n}"
    )
    assert got.status == "received", got
    return str(got.message_id)


def test_an_operator_lists_without_bodies_and_reads_one_with_its_body(operator_raw):
    first = receive("First")
    receive("Second")
    listed = call(operator_raw, "adminSystemEmailList", {"limit": 1})
    assert listed.status_code == 200, listed.content
    page = listed.json()
    assert [msg["subject"] for msg in page["messages"]] == ["Second"]
    assert "text" not in page["messages"][0] and "html" not in page["messages"][0]
    rest = call(operator_raw, "adminSystemEmailList", {"cursor": page["nextCursor"]}).json()
    assert [msg["messageId"] for msg in rest["messages"]] == [first]
    one = call(operator_raw, "adminSystemEmailGet", {"messageId": first}).json()
    assert one["subject"] == "First" and one["text"]
    missing = call(operator_raw, "adminSystemEmailGet", {"messageId": "nope"})
    assert (
        missing.status_code == 404 and missing.json()["error"]["code"] == "system_email_not_found"
    )
    assert audited("adminSystemEmailList") == ["adminSystemEmailList"] * 2


def test_an_operator_replies_from_support_audited_first(operator_raw):
    parent = receive("Help")
    sent = call(
        operator_raw,
        "adminSystemEmailSend",
        {"local": "support", "to": ["ann@example.org"], "subject": "Re: Help", "text": "On it.",
         "replyToMessageId": parent},
    )  # fmt: skip
    assert sent.status_code == 200, sent.content
    assert sent.json()["processingStatus"] == "sent"
    [email] = mail.outbox
    assert email.from_email == f"support@{DOMAIN}" and email.to == ["ann@example.org"]
    assert "In-Reply-To" in email.extra_headers
    assert audited("adminSystemEmailSend") == [
        "adminSystemEmailSend:intent",
        "adminSystemEmailSend",
    ]


def test_a_send_from_a_person_local_is_refused(operator_raw):
    refused = call(
        operator_raw,
        "adminSystemEmailSend",
        {"local": "ada", "to": ["ann@example.org"], "subject": "x", "text": "y"},
    )
    assert refused.status_code == 422 and mail.outbox == []


def test_sender_rules_block_and_quarantine_system_mail(operator_raw):
    blocked = call(
        operator_raw,
        "adminSystemEmailSenderRuleSet",
        {"kind": "domain", "value": "spam.example", "effect": "block", "note": "spam"},
    )
    assert blocked.status_code == 200, blocked.content
    call(
        operator_raw,
        "adminSystemEmailSenderRuleSet",
        {"kind": "address", "value": "odd@example.org", "effect": "quarantine"},
    )
    refused = inbound.deliver(
        simple_mail("Buy", sender="x@spam.example"), f"support@{DOMAIN}", "sys-spam"
    )
    assert refused.status == "rejected" and refused.reason == "sender_blocked"
    assert not m.SystemEmailMessage.objects.filter(subject="Buy").exists()
    odd = receive("Odd", sender="odd@example.org")
    assert m.SystemEmailMessage.objects.get(pk=odd).classification == "quarantined"

    rules = call(operator_raw, "adminSystemEmailSenderRuleList").json()["rules"]
    assert {(r["kind"], r["value"], r["effect"]) for r in rules} == {
        ("domain", "spam.example", "block"),
        ("address", "odd@example.org", "quarantine"),
    }
    assert set(EmailSenderRule.objects.values_list("user_id", flat=True)) == {SYSTEM_EMAIL_OWNER}
    gone = call(operator_raw, "adminSystemEmailSenderRuleDelete", {"ruleId": rules[0]["id"]})
    assert gone.status_code == 200 and gone.json()["deleted"] is True
    again = call(operator_raw, "adminSystemEmailSenderRuleDelete", {"ruleId": rules[0]["id"]})
    assert again.status_code == 404
    assert audited("adminSystemEmailSenderRuleSet")[:2] == [
        "adminSystemEmailSenderRuleSet:intent",
        "adminSystemEmailSenderRuleSet",
    ]


def test_a_persons_rules_never_touch_the_system_mailbox(owner, operator_raw):
    EmailSenderRule.objects.create(
        user_id=owner.stable_user_id, kind="domain", value="example.org", effect="block"
    )
    assert call(operator_raw, "adminSystemEmailSenderRuleList").json()["rules"] == []
    receive("Still arrives")


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("adminSystemEmailList", {}),
        ("adminSystemEmailGet", {"messageId": "x"}),
        (
            "adminSystemEmailSend",
            {"local": "support", "to": ["a@b.c"], "subject": "s", "text": "t"},
        ),
        ("adminSystemEmailSenderRuleList", {}),
        ("adminSystemEmailSenderRuleSet", {"kind": "domain", "value": "a.b", "effect": "block"}),
        ("adminSystemEmailSenderRuleDelete", {"ruleId": "x"}),
    ],
)
def test_a_user_gets_403_and_changes_nothing(owner_raw, name, payload):
    receive("Private")
    response = call(owner_raw, name, payload)
    assert response.status_code == 403
    assert b"Private" not in response.content
    assert mail.outbox == [] and not EmailSenderRule.objects.exists()
    assert audited(name) == [name]  # the refused attempt is audited too
