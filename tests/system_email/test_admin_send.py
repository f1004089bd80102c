"""Operators send (and reply) from a reserved system address in /admin/; others cannot."""

from __future__ import annotations

import pytest
from django.core import mail

from apps.mailbox.services import inbound
from apps.system_email import models as m
from tests.mailbox.conftest import DOMAIN, simple_mail

pytestmark = pytest.mark.django_db

URL = "/admin/system_email/systememailmessage/send/"


def test_an_operator_replies_from_support(operator_client):
    received = inbound.deliver(simple_mail("Help!", sender="ann@example.org"),
                               f"support@{DOMAIN}", "adm-1")  # fmt: skip
    form = operator_client.get(f"{URL}?reply_to={received.message_id}")
    assert form.status_code == 200 and b"Re: Help!" in form.content
    response = operator_client.post(
        f"{URL}?reply_to={received.message_id}",
        {"local": "support", "to": "ann@example.org", "subject": "Re: Help!", "text": "On it."},
    )
    assert response.status_code == 302
    [email] = mail.outbox
    assert email.from_email == f"support@{DOMAIN}" and email.to == ["ann@example.org"]
    assert email.extra_headers["In-Reply-To"] == "<m1@example.org>"
    sent = m.SystemEmailMessage.objects.get(direction="outbound")
    original = m.SystemEmailMessage.objects.get(id=received.message_id)
    assert (sent.processing_status, sent.provider_message_id) == ("sent", None)
    assert sent.thread_id == original.thread_id


def test_people_without_operator_rights_cannot_send(owner_client):
    response = owner_client.post(
        URL, {"local": "support", "to": "x@example.org", "subject": "s", "text": "t"}
    )
    assert response.status_code == 302 and "/login" in response["Location"]
    assert mail.outbox == [] and not m.SystemEmailMessage.objects.exists()
