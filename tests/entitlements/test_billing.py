"""Stripe checkout, portal, webhook and plan refresh against a local HTTP fake of Stripe."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
from unittest import mock

import pytest

from apps.accounts.models import User
from apps.entitlements.models import StripeWebhookEvent
from apps.entitlements.plans import Plan
from apps.entitlements.services import billing
from apps.entitlements.services.plan_cache import cached_plan
from tests.entitlements.factories import StripeWebhookEventFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _no_refresh_alarm():
    # The StripePlanRefresh backstop has its own tests; here it would need the actor layer.
    with mock.patch.object(billing, "arm_plan_refresh") as armed:
        yield armed


def signed(
    payload: dict, secret: str = "whsec_test_fake", at: int | None = None
) -> tuple[bytes, str]:
    body = json.dumps(payload).encode()
    stamp = at or int(time.time())
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return body, f"t={stamp},v1={digest}"


def event(event_id: str, event_type: str, obj: dict) -> dict:
    return {"id": event_id, "object": "event", "type": event_type, "data": {"object": obj}}


def post_webhook(client, payload: dict, **kwargs):
    body, header = signed(payload, **kwargs)
    return client.post(
        "/webhooks/stripe",
        data=body,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=header,
    )


def subscribe(fake, user: User, key: str = "kody_standard_month", status: str = "active") -> str:
    if not user.stripe_customer_id:
        customer = fake.add_customer(user.email, {"stable_user_id": user.stable_user_id})
        User.objects.filter(pk=user.pk).update(stripe_customer_id=customer["id"])
        user.refresh_from_db()
    return fake.add_subscription(user.stripe_customer_id, key, status)["id"]


# --- billing off --------------------------------------------------------------------------------


def test_billing_page_says_billing_is_off_without_a_key(client, owner, billing_off):
    client.force_login(owner)
    response = client.get("/account/billing")
    assert response.status_code == 200
    assert b"Billing is off" in response.content
    assert b"customer portal" not in response.content


def test_checkout_without_a_key_answers_cleanly(client, owner, billing_off):
    client.force_login(owner)
    response = client.post("/account/billing/checkout.json", {"plan": "standard"})
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "billing_disabled"


def test_webhook_without_a_secret_is_refused_not_crashed(client, billing_off):
    response = post_webhook(client, event("evt_1", "invoice.paid", {"object": "invoice"}))
    assert response.status_code == 503


# --- checkout and portal ------------------------------------------------------------------------


def test_checkout_creates_one_customer_and_redirects_to_stripe(client, owner, stripe_fake):
    client.force_login(owner)
    response = client.post("/account/billing/checkout", {"plan": "pro", "interval": "year"})
    assert response.status_code == 302
    assert response["Location"].startswith("https://checkout.stripe.test/c/")
    owner.refresh_from_db()
    assert owner.stripe_customer_id in stripe_fake.customers
    session = next(iter(stripe_fake.checkout_sessions.values()))
    assert session["client_reference_id"] == owner.stable_user_id
    assert stripe_fake.prices[session["price"]]["lookup_key"] == "kody_pro_year"
    client.post("/account/billing/checkout", {"plan": "standard", "interval": "month"})
    assert len(stripe_fake.customers) == 1  # the customer is reused


def test_checkout_refuses_max_and_unknown_plans(client, owner, stripe_fake):
    client.force_login(owner)
    for plan in ("max", "gold", "free"):
        response = client.post("/account/billing/checkout.json", {"plan": plan})
        assert response.status_code == 409
    assert not stripe_fake.checkout_sessions


def test_checkout_reports_a_stripe_outage(client, owner, stripe_fake):
    client.force_login(owner)
    stripe_fake.fail_next = 10
    response = client.post("/account/billing/checkout.json", {"plan": "standard"})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "billing_unavailable"


def test_portal_link_is_for_the_callers_own_customer(client, owner, outsider, stripe_fake):
    subscribe(stripe_fake, owner)
    subscribe(stripe_fake, outsider)
    owner.refresh_from_db()
    client.force_login(owner)
    response = client.post("/account/billing/portal", {"customer": outsider.stripe_customer_id})
    assert response.status_code == 302
    method, path, params = stripe_fake.requests[-1]
    assert path == "/v1/billing_portal/sessions"
    assert params["customer"] == owner.stripe_customer_id


def test_portal_without_a_customer_explains(client, owner, stripe_fake):
    client.force_login(owner)
    response = client.post("/account/billing/portal")
    assert response.status_code == 409


def test_billing_pages_need_a_login(client, stripe_fake):
    assert client.get("/account/billing").status_code == 302
    assert client.post("/account/billing/checkout", {"plan": "pro"}).status_code == 302
    assert not stripe_fake.requests


# --- webhook ------------------------------------------------------------------------------------


def test_webhook_rejects_a_bad_signature(client, owner, stripe_fake):
    payload = event("evt_bad", "customer.subscription.updated", {"customer": "cus_x"})
    response = post_webhook(client, payload, secret="whsec_wrong")
    assert response.status_code == 400
    assert not StripeWebhookEvent.objects.exists()


def test_webhook_rejects_a_stale_signature(client, stripe_fake):
    payload = event("evt_old", "invoice.paid", {"object": "invoice"})
    response = post_webhook(client, payload, at=int(time.time()) - 3600)
    assert response.status_code == 400


def test_subscription_webhook_refreshes_the_plan(
    client, owner, stripe_fake, django_capture_on_commit_callbacks
):
    subscribe(stripe_fake, owner, "kody_standard_month")
    assert cached_plan(owner.stable_user_id) is Plan.FREE
    payload = event(
        "evt_sub_1",
        "customer.subscription.created",
        {"object": "subscription", "customer": owner.stripe_customer_id},
    )
    with django_capture_on_commit_callbacks(execute=True):
        response = post_webhook(client, payload)
    assert response.status_code == 200
    assert response.json() == {"received": True, "duplicate": False}
    owner.refresh_from_db()
    assert owner.stripe_plan == "standard"
    assert owner.stripe_plan_refreshed_at is not None
    assert cached_plan(owner.stable_user_id) is Plan.STANDARD
    assert StripeWebhookEvent.objects.filter(event_id="evt_sub_1").exists()


def test_replayed_webhook_is_processed_once(client, owner, stripe_fake):
    subscribe(stripe_fake, owner)
    payload = event(
        "evt_dup",
        "customer.subscription.updated",
        {"object": "subscription", "customer": owner.stripe_customer_id},
    )
    assert post_webhook(client, payload).json()["duplicate"] is False
    calls = len(stripe_fake.paths("GET"))
    assert post_webhook(client, payload).json()["duplicate"] is True
    assert len(stripe_fake.paths("GET")) == calls  # no second Stripe read
    assert StripeWebhookEvent.objects.filter(event_id="evt_dup").count() == 1


def test_cancelled_subscription_drops_the_stripe_plan(client, owner, stripe_fake):
    sub = subscribe(stripe_fake, owner, "kody_pro_month")
    post_webhook(
        client,
        event(
            "evt_a",
            "customer.subscription.created",
            {"object": "subscription", "customer": owner.stripe_customer_id},
        ),
    )
    owner.refresh_from_db()
    assert owner.stripe_plan == "pro"
    stripe_fake.subscriptions[sub]["status"] = "canceled"
    post_webhook(
        client,
        event(
            "evt_b",
            "customer.subscription.deleted",
            {"object": "subscription", "customer": owner.stripe_customer_id},
        ),
    )
    owner.refresh_from_db()
    assert owner.stripe_plan is None


def test_checkout_completed_links_the_customer_by_reference(client, owner, stripe_fake):
    customer = stripe_fake.add_customer(owner.email)
    stripe_fake.add_subscription(customer["id"], "kody_pro_year")
    payload = event(
        "evt_cs",
        "checkout.session.completed",
        {
            "object": "checkout.session",
            "customer": customer["id"],
            "client_reference_id": owner.stable_user_id,
        },
    )
    assert post_webhook(client, payload).status_code == 200
    owner.refresh_from_db()
    assert owner.stripe_customer_id == customer["id"]
    assert owner.stripe_plan == "pro"


def test_checkout_completed_never_relinks_someone_elses_account(
    client, owner, outsider, stripe_fake
):
    subscribe(stripe_fake, outsider)
    outsider.refresh_from_db()
    stolen = stripe_fake.add_customer("mallory@example.test")
    stripe_fake.add_subscription(stolen["id"], "kody_pro_year")
    payload = event(
        "evt_steal",
        "checkout.session.completed",
        {
            "object": "checkout.session",
            "customer": stolen["id"],
            "client_reference_id": outsider.stable_user_id,
        },
    )
    post_webhook(client, payload)
    outsider.refresh_from_db()
    assert outsider.stripe_customer_id != stolen["id"]
    assert outsider.stripe_plan is None


def test_a_stripe_price_for_max_is_ignored(client, owner, stripe_fake):
    stripe_fake.add_price("kody_max_month", metadata={"kody_plan": "max"})
    subscribe(stripe_fake, owner, "kody_max_month")
    assert billing.refresh_plan_unsafe_in_transaction(owner.stable_user_id) is None
    owner.refresh_from_db()
    assert owner.stripe_plan is None


def test_past_due_keeps_the_plan_and_incomplete_does_not_grant(owner, stripe_fake):
    subscribe(stripe_fake, owner, "kody_standard_month", status="incomplete")
    assert billing.refresh_plan_unsafe_in_transaction(owner.stable_user_id) is None
    subscribe(stripe_fake, owner, "kody_pro_month", status="past_due")
    assert billing.refresh_plan_unsafe_in_transaction(owner.stable_user_id) is Plan.PRO


def test_webhook_during_a_stripe_outage_is_recorded_and_left_to_the_alarm(
    client, owner, stripe_fake, _no_refresh_alarm
):
    subscribe(stripe_fake, owner)
    stripe_fake.fail_next = 10
    payload = event(
        "evt_out",
        "customer.subscription.updated",
        {"object": "subscription", "customer": owner.stripe_customer_id},
    )
    assert post_webhook(client, payload).status_code == 200
    _no_refresh_alarm.assert_called_with(owner.stable_user_id)


def test_success_page_refreshes_the_plan(client, owner, stripe_fake):
    subscribe(stripe_fake, owner, "kody_pro_month")
    client.force_login(owner)
    response = client.get("/account/billing/success?session_id=cs_x")
    assert response.status_code == 302
    owner.refresh_from_db()
    assert owner.stripe_plan == "pro"


def test_old_webhook_events_are_pruned_after_30_days(db):
    from datetime import timedelta

    from django.utils import timezone

    StripeWebhookEventFactory(event_id="evt_new")
    StripeWebhookEventFactory(event_id="evt_old", processed_at=timezone.now() - timedelta(days=31))
    assert billing.prune_webhook_events() == 1
    assert list(StripeWebhookEvent.objects.values_list("event_id", flat=True)) == ["evt_new"]
