"""Mail to a reserved system address reaches the system mailbox through the Mailbox's routing,
which system email registered with (the Mailbox does not import it); the operator's mail
status counts it there, and no user's mailbox sees it."""

from __future__ import annotations

import pytest

from apps.mailbox.services import inbound
from apps.system_email import models as m
from tests.mailbox.conftest import DOMAIN, cap, operator_key, owner_key, simple_mail  # noqa: F401

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_system_mail_is_handed_to_system_email_and_counted_in_the_operators_status(
    operator_key,  # noqa: F811
    owner_key,  # noqa: F811
):
    received = inbound.deliver(simple_mail("Abuse report"), f"abuse@{DOMAIN}", "sys-1")
    assert received.status == "received"
    stored = m.SystemEmailMessage.objects.get(id=received.message_id)
    assert stored.subject == "Abuse report"

    status = cap(operator_key, "adminMailboxMaintenance", {"action": "status"}).json()
    assert status["systemEmail"]["messages"] == 1
    assert status["systemEmail"]["invalidReferences"] == 0
    # Not the user's mail: their mailbox is empty, and they may not read the fleet status.
    assert cap(owner_key, "emailMessageList").json()["messages"] == []
    refused = cap(owner_key, "adminMailboxMaintenance", {"action": "status"})
    assert refused.status_code in (403, 404)


def test_system_mail_without_a_delivery_id_is_received_once():
    # Without a provider id the bytes and recipient stand in for one (71 characters): the
    # daily counter records it whole, and a redelivery of the same bytes is a duplicate.
    raw = simple_mail("No id")
    first = inbound.deliver(raw, f"support@{DOMAIN}")
    assert first.status == "received"
    assert m.SystemEmailDailyCounter.objects.get(local_part="support").operation_token == (
        inbound.delivery_id_for(raw, f"support@{DOMAIN}")
    )
    again = inbound.deliver(raw, f"support@{DOMAIN}")
    assert again.status == "duplicate"
    assert m.SystemEmailMessage.objects.count() == 1
