"""The database itself refuses rows that break the shared email tables' constraints."""

from __future__ import annotations

import pytest

from apps.mailbox import models as mb
from tests.rows import BOB, make

pytestmark = pytest.mark.django_db


def test_every_mailbox_table_accepts_a_valid_row():
    for model in (
        mb.EmailInboxAddress,
        mb.EmailSenderIdentity,
        mb.EmailSenderRule,
        mb.EmailOutboundProviderIndex,
        mb.EmailOutboundProviderIndexRepairOwner,
        mb.EmailInboundDueOwner,
        mb.EmailDeliveryAlertEvent,
    ):
        make(model)
        assert model.objects.count() == 1, model.__name__


def test_inbox_names_are_unique_per_user(refused):
    make(mb.EmailInbox)
    make(mb.EmailInbox, user_id=BOB)
    refused(lambda: make(mb.EmailInbox))


def test_an_address_belongs_to_one_inbox_anywhere(refused):
    address = make(mb.EmailInboxAddress)
    other = make(mb.EmailInbox, user_id=BOB)
    refused(lambda: make(mb.EmailInboxAddress, inbox=other, user_id=BOB))
    assert address.inbox_id != other.id


def test_addresses_need_an_inbox_and_go_with_it(refused, sql):
    refused(lambda: make(mb.EmailInboxAddress, inbox=mb.EmailInbox(id="ghost")))
    address = make(mb.EmailInboxAddress)
    sql("DELETE FROM email_inboxes WHERE id = %s", (address.inbox_id,))
    assert not mb.EmailInboxAddress.objects.exists()


def test_sender_identities_are_verified_and_unique(refused):
    refused(lambda: make(mb.EmailSenderIdentity, status="pending"))
    make(mb.EmailSenderIdentity)
    refused(lambda: make(mb.EmailSenderIdentity))


def test_sender_rules_are_closed_sets_and_unique(refused):
    refused(lambda: make(mb.EmailSenderRule, kind="header"))
    refused(lambda: make(mb.EmailSenderRule, effect="bounce"))
    make(mb.EmailSenderRule)
    refused(lambda: make(mb.EmailSenderRule, effect="allow"))


def test_provider_index_keys_are_unique(refused):
    make(mb.EmailOutboundProviderIndex)
    refused(lambda: make(mb.EmailOutboundProviderIndex, message_id="msg-2"))
    refused(lambda: make(mb.EmailOutboundProviderIndex, provider_message_id="pm-2"))
    make(mb.EmailOutboundProviderIndex, provider="other", message_id="msg-2")


def test_provider_index_never_holds_operator_mail(refused):
    refused(lambda: make(mb.EmailOutboundProviderIndex, user_id=mb.SYSTEM_EMAIL_OWNER))


def test_alert_event_type_is_bounced_or_complained(refused):
    refused(lambda: make(mb.EmailDeliveryAlertEvent, event_type="delivered"))


def test_graph_authority_marker_exists_and_is_a_singleton(refused):
    marker = mb.EmailUserGraphAuthority.objects.get()
    assert marker.id == 1 and marker.owner_count == 0
    refused(lambda: mb.EmailUserGraphAuthority.objects.create(id=2))
