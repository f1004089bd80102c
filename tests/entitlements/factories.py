"""factory_boy factories for the entitlements app's public tables (plans and subscriptions are
columns of the user: ``UserFactory(plan="max")``, ``UserFactory(subscribed=True)``)."""

from __future__ import annotations

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from apps.entitlements import models as ent
from tests.rows import ALICE

this_month = factory.LazyFunction(lambda: timezone.now().strftime("%Y-%m"))


class UsageEventFactory(DjangoModelFactory):
    class Meta:
        model = ent.UsageEvent

    user_id = ALICE
    metric = "execute"
    duration_ms = 5


class UsageRollupFactory(DjangoModelFactory):
    class Meta:
        model = ent.UsageRollup

    user_id = ALICE
    metric = "execute"
    month = this_month


class StripeWebhookEventFactory(DjangoModelFactory):
    class Meta:
        model = ent.StripeWebhookEvent

    event_id = factory.Sequence(lambda n: f"evt_test{n}")
    event_type = "invoice.paid"


class ComputeOverageInvoiceFactory(DjangoModelFactory):
    """An invoiced month of compute overage (3 worker-days and 10 rows read)."""

    class Meta:
        model = ent.ComputeOverageInvoice

    user_id = ALICE
    month = this_month
    unique_worker_days = 3
    unique_worker_day_cents = 30
    durable_object_rows_read = 10
    durable_object_rows_read_cents = 1
    total_cents = 31
    disposition = "invoice"
    status = "invoice"
