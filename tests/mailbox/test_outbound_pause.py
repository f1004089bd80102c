"""``users.email_outbound_paused_at``: once an operator pauses an account's outbound mail,
nothing of that account leaves — not a new send, not one stored before the pause and handed
over by the outbox relay afterwards. Other people's mail is not affected."""

from __future__ import annotations

import pytest
from django.core import mail
from django.utils import timezone

from apps.accounts.models import User
from apps.mailbox.actor import Mailbox
from apps.mailbox.services import outbound
from kody import outbox
from tests.mailbox.conftest import cap

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

SEND = {"to": ["Bob <bob@example.org>"], "subject": "Invoice", "text": "Attached."}


@pytest.fixture(autouse=True)
def _no_kick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("kody.outbox.core._kick", lambda: None)


def pause(user: User) -> None:
    User.objects.filter(pk=user.pk).update(email_outbound_paused_at=timezone.now())


def sends_today(key: str) -> int:
    return cap(key, "emailUsageGet").json()["sendsPerDay"]["used"]


def test_a_paused_account_cannot_send_and_is_not_charged(owner, owner_key):
    pause(owner)
    response = cap(owner_key, "emailSend", SEND)
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "email_outbound_paused"
    assert mail.outbox == []
    assert sends_today(owner_key) == 0
    assert cap(owner_key, "emailMessageList").json()["messages"] == []


def test_mail_stored_before_the_pause_is_failed_by_the_relay_not_sent(
    owner, owner_key, monkeypatch
):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "submit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError()))
        sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "stored" and sends_today(owner_key) == 1
    pause(owner)
    outbox.relay()
    assert mail.outbox == []
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=sent["messageId"])
    assert got["processingStatus"] == "failed"
    assert sends_today(owner_key) == 0  # refunded: nothing left


def test_one_accounts_pause_does_not_stop_anyone_elses_mail(owner, owner_key, outsider_key):
    pause(owner)
    response = cap(outsider_key, "emailSend", SEND)
    assert response.status_code == 200 and response.json()["status"] == "sent"
    assert len(mail.outbox) == 1


def test_a_suspended_account_sends_nothing_even_from_a_stored_message(
    owner, owner_key, monkeypatch
):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "submit", lambda *a, **k: (_ for _ in ()).throw(RuntimeError()))
        sent = cap(owner_key, "emailSend", SEND).json()
    User.objects.filter(pk=owner.pk).update(suspended_at=timezone.now())
    outbox.relay()
    assert mail.outbox == []
    got = Mailbox.call(owner.stable_user_id, "get_message", message_id=sent["messageId"])
    assert got["processingStatus"] == "failed"
