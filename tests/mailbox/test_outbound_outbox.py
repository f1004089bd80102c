"""Outbound sends go through the kernel's outbox: a crash anywhere between the Mailbox commit
and the recorded result neither loses the mail nor submits it twice."""

from __future__ import annotations

from datetime import timedelta

import pytest
import time_machine
from django.core import mail
from django.db import connection
from django.utils import timezone

from apps.mailbox.actor import Mailbox
from apps.mailbox.actor.mailbox import submission_key
from apps.mailbox.errors import MessageNotFound
from apps.mailbox.services import outbound
from kody import outbox
from kody.outbox.models import OutboxMessage
from tests.mailbox.conftest import cap

# The relay runs outside any transaction, as in production: these tests commit for real.
pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

SEND = {"to": ["Bob <bob@example.org>"], "subject": "Invoice", "text": "Attached."}


class Killed(Exception):
    """The worker dies here (raised where the crash is injected)."""


@pytest.fixture(autouse=True)
def _no_kick(monkeypatch: pytest.MonkeyPatch) -> None:
    """No relay right after COMMIT (as if the process died there): the tests relay by hand."""
    monkeypatch.setattr("kody.outbox.core._kick", lambda: None)


def killed(*args, **kwargs):
    raise Killed()


def stored(user, message_id: str) -> dict:
    return Mailbox.call(user.stable_user_id, "get_message", message_id=message_id)


def sends_today(owner_key: str) -> int:
    return cap(owner_key, "emailUsageGet").json()["sendsPerDay"]["used"]


def relay_due() -> outbox.RelayReport:
    """Relay whatever is queued now, backoffs included (the clock does not wait in tests)."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE kody_outbox SET available_at = now() - interval '1 second'")
    return outbox.relay()


def test_a_crash_between_the_commit_and_the_submission_loses_nothing(owner, owner_key, monkeypatch):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "submit", killed)
        response = cap(owner_key, "emailSend", SEND)
    assert response.status_code == 200
    sent = response.json()
    assert sent["status"] == "stored" and mail.outbox == []
    assert OutboxMessage.objects.filter(key=submission_key(sent["messageId"])).exists()

    assert outbox.relay().sent == 1
    [email] = mail.outbox
    got = stored(owner, sent["messageId"])
    assert got["processingStatus"] == "sent"
    assert got["providerMessageId"] == email.extra_headers["Message-ID"]
    assert not OutboxMessage.objects.exists()
    assert relay_due().handled == 0 and len(mail.outbox) == 1


def test_the_relay_replaying_a_finished_send_submits_nothing(owner, owner_key):
    sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "sent" and len(mail.outbox) == 1
    # The submission's outbox row is still there (the relay deletes it): at least once.
    assert outbox.relay().sent == 1
    assert len(mail.outbox) == 1 and not OutboxMessage.objects.exists()
    assert stored(owner, sent["messageId"])["processingStatus"] == "sent"
    assert sends_today(owner_key) == 1


def test_a_submitter_killed_after_the_provider_accepted_never_resends(
    owner, owner_key, monkeypatch
):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "_record", killed)  # dies right after the provider's yes
        sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "stored" and len(mail.outbox) == 1

    report = relay_due()  # the claim is fresh: someone may still be recording, so wait
    assert (report.sent, report.failed) == (0, 1) and len(mail.outbox) == 1
    with time_machine.travel(timezone.now() + timedelta(minutes=11)):
        assert relay_due().sent == 1
    got = stored(owner, sent["messageId"])
    assert (got["processingStatus"], got["error"]) == ("failed", "submission_interrupted")
    assert len(mail.outbox) == 1 and not OutboxMessage.objects.exists()


def test_a_result_the_mailbox_cannot_take_is_recorded_through_the_outbox(
    owner, owner_key, monkeypatch
):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "record_result", killed)  # the Mailbox does not answer
        sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "sent" and len(mail.outbox) == 1
    assert stored(owner, sent["messageId"])["processingStatus"] == "stored"

    relay_due()  # the submission waits on its claim; the result is recorded
    relay_due()  # now the submission finds the result and is done
    got = stored(owner, sent["messageId"])
    assert got["processingStatus"] == "sent"
    assert got["providerMessageId"] == sent["providerMessageId"]
    assert len(mail.outbox) == 1 and not OutboxMessage.objects.exists()


def test_a_refused_submission_is_failed_once_and_refunded(owner, owner_key, monkeypatch):
    attempts = []

    def refuse(self, *args, **kwargs):
        attempts.append(self.subject)
        raise ConnectionRefusedError("smtp down")

    monkeypatch.setattr("django.core.mail.EmailMultiAlternatives.send", refuse)
    sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "failed" and "smtp down" in sent["error"]
    assert relay_due().sent == 1
    assert attempts == ["Invoice"]  # the relay found the result and submitted nothing
    assert stored(owner, sent["messageId"])["processingStatus"] == "failed"
    assert sends_today(owner_key) == 0


def test_outsider_cannot_claim_or_submit_someone_elses_message(
    owner, outsider, owner_key, monkeypatch
):
    with monkeypatch.context() as patch:
        patch.setattr(outbound, "submit", killed)
        message_id = cap(owner_key, "emailSend", SEND).json()["messageId"]
    with pytest.raises(MessageNotFound):
        outbound.submit(outsider.stable_user_id, message_id)
    assert mail.outbox == []
    assert stored(owner, message_id)["processingStatus"] == "stored"


def test_a_send_that_finds_its_message_claimed_answers_stored_without_submitting(
    owner, owner_key, monkeypatch
):
    real_submit = outbound.submit

    def relay_wins(uid: str, message_id: str) -> dict:
        # The relay's kick reaches the Mailbox first and holds the claim (still submitting).
        Mailbox.call(uid, "claim_submission", message_id=message_id, provider="django")
        return real_submit(uid, message_id)

    with monkeypatch.context() as patch:
        patch.setattr(outbound, "submit", relay_wins)
        sent = cap(owner_key, "emailSend", SEND).json()
    assert sent["status"] == "stored" and mail.outbox == []
    assert relay_due().failed == 1  # the claim is fresh: the relay waits for its holder
    assert stored(owner, sent["messageId"])["processingStatus"] == "stored"
