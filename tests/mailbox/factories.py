"""factory_boy factories for the mailbox app's shared tables: one valid row per model."""

from __future__ import annotations

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.mailbox import models as mb
from tests.rows import ALICE, registers

now = factory.LazyFunction(timezone.now)


def _factory(model, **fields):  # type: ignore[no-untyped-def]
    return registers(factory.make_factory(model, FACTORY_CLASS=DjangoModelFactory, **fields))


EmailInboxFactory = _factory(mb.EmailInbox, user_id=ALICE, name="main")
EmailInboxAddressFactory = _factory(
    mb.EmailInboxAddress,
    inbox=factory.SubFactory(EmailInboxFactory),
    user_id=ALICE,
    address="alice@alice.kody.run",
    local_part="alice",
    domain="alice.kody.run",
)
EmailSenderIdentityFactory = _factory(
    mb.EmailSenderIdentity, user_id=ALICE, email="alice@alice.kody.run", domain="alice.kody.run"
)
EmailSenderRuleFactory = _factory(
    mb.EmailSenderRule, user_id=ALICE, kind="domain", value="spam.example", effect="block"
)
EmailOutboundProviderIndexFactory = _factory(
    mb.EmailOutboundProviderIndex,
    provider="cloudflare-email",
    provider_message_id="pm-1",
    user_id=ALICE,
    message_id="msg-1",
    inbox_id="inbox-1",
)
EmailOutboundProviderIndexRepairOwnerFactory = _factory(
    mb.EmailOutboundProviderIndexRepairOwner, user_id=ALICE, pending_count=1
)
EmailInboundDueOwnerFactory = _factory(
    mb.EmailInboundDueOwner, user_id=ALICE, due_at=now, reason="stale"
)
EmailDeliveryAlertEventFactory = _factory(
    mb.EmailDeliveryAlertEvent,
    provider_event_id="ev-1",
    provider="cloudflare-email",
    event_type="bounced",
    occurred_at=now,
    owner_hash="h",
)


@registers
class EmailUserGraphAuthorityFactory(DjangoModelFactory):
    """The seeded singleton: the migration's row, never a second one."""

    class Meta:
        model = mb.EmailUserGraphAuthority
        django_get_or_create = ("id",)

    id = 1
