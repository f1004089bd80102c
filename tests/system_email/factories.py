"""factory_boy factories for the system_email app: the operator-owned mail graph of the
reserved locals (no user column; ``system:email`` owns every row)."""

from __future__ import annotations

from datetime import date

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.system_email import models as se

now = factory.LazyFunction(timezone.now)


class SystemEmailThreadFactory(DjangoModelFactory):
    class Meta:
        model = se.SystemEmailThread

    subject_normalized = "hello"
    last_message_at = now


class SystemEmailMessageFactory(DjangoModelFactory):
    """A stored inbound message to support@, in no inbox or thread unless given."""

    class Meta:
        model = se.SystemEmailMessage

    direction = se.Direction.INBOUND
    from_address = "someone@example.org"
    to_addresses_json = factory.LazyFunction(lambda: ["support@kody.run"])
    subject = "Hello"
    processing_status = se.ProcessingStatus.STORED
    received_at = now


class SystemEmailAttachmentFactory(DjangoModelFactory):
    class Meta:
        model = se.SystemEmailAttachment

    message = factory.SubFactory(SystemEmailMessageFactory)
    content_type = "text/plain"
    storage_kind = se.StorageKind.RAW_MIME


class SystemEmailDeliveryEventFactory(DjangoModelFactory):
    class Meta:
        model = se.SystemEmailDeliveryEvent

    event_type = se.DeliveryEventType.RECEIVED


class SystemEmailDailyCounterFactory(DjangoModelFactory):
    class Meta:
        model = se.SystemEmailDailyCounter

    local_part = "support"
    day = date(2026, 11, 1)
