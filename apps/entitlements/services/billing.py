"""Stripe: checkout and portal links, the webhook, and the plan refresh.

Design note: Stripe is the source of truth for ``users.stripe_plan``. Every path that learns
something changed (a webhook, the return from checkout, the StripePlanRefresh alarm) does the
same idempotent thing — list the customer's subscriptions and store the best plan they pay
for — instead of applying event deltas, so a replayed, reordered or missed event can never
leave a wrong plan behind. Functions named ``*_unsafe_in_transaction`` talk to Stripe over
the network and must not run while holding database locks.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import stripe
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from apps.accounts.models import User
from apps.accounts.services import referrals
from apps.entitlements.models import StripeWebhookEvent
from apps.entitlements.plans import Plan, parse_plan
from apps.entitlements.services.plan_cache import invalidate_plan
from kody.errors import Conflict, KodyError

log = logging.getLogger(__name__)

INTERVALS = ("month", "year")
PURCHASABLE = (Plan.STANDARD, Plan.PRO)
# Subscriptions in these states still pay for (or are in grace for) their plan.
PAYING_STATUSES = {"active", "trialing", "past_due"}
HANDLED_EVENTS = {
    "checkout.session.completed",
    "customer.subscription.created",
    "customer.subscription.updated",
    "customer.subscription.deleted",
    "customer.subscription.paused",
    "customer.subscription.resumed",
    "invoice.paid",
    "invoice.payment_failed",
}


class BillingDisabled(KodyError):
    code = "billing_disabled"
    status = 503
    message = "Billing is not configured on this Kody server."


class BillingUnavailable(KodyError):
    code = "billing_unavailable"
    status = 502
    message = "Stripe could not be reached; try again in a moment."


class InvalidSignature(KodyError):
    code = "invalid_signature"
    status = 400
    message = "The Stripe signature did not verify."


def billing_enabled() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def lookup_key(plan: Plan, interval: str) -> str:
    return f"kody_{plan.value}_{interval}"


def client() -> stripe.StripeClient:
    if not billing_enabled():
        raise BillingDisabled()
    base = settings.STRIPE_API_BASE
    return stripe.StripeClient(
        settings.STRIPE_SECRET_KEY,
        base_addresses={"api": base} if base else None,
        max_network_retries=1,
    )


def plan_of_price(price: dict[str, Any]) -> Plan | None:
    named = parse_plan((price.get("metadata") or {}).get("kody_plan"))
    if named is None:
        key = price.get("lookup_key") or ""
        parts = key.split("_")
        named = parse_plan(parts[1]) if len(parts) == 3 and parts[0] == "kody" else None
    return named if named in PURCHASABLE else None  # Stripe never grants max


def best_paid_plan(subscriptions: list[dict[str, Any]]) -> Plan | None:
    best: Plan | None = None
    for sub in subscriptions:
        if sub.get("status") not in PAYING_STATUSES:
            continue
        for item in (sub.get("items") or {}).get("data", []):
            plan = plan_of_price(item.get("price") or {})
            if plan and (best is None or plan.rank > best.rank):
                best = plan
    return best


# --- customers and links ---------------------------------------------------------------------


def ensure_customer_unsafe_in_transaction(user: User) -> str:
    if user.stripe_customer_id:
        return str(user.stripe_customer_id)
    try:
        customer = client().v1.customers.create(
            params={"email": user.email, "metadata": {"stable_user_id": user.stable_user_id}}
        )
    except stripe.StripeError as exc:
        raise BillingUnavailable() from exc
    won = User.objects.filter(pk=user.pk, stripe_customer_id__isnull=True).update(
        stripe_customer_id=customer.id
    )
    if not won:  # a concurrent request attached a customer first; use theirs
        user.refresh_from_db(fields=["stripe_customer_id"])
        return str(user.stripe_customer_id)
    user.stripe_customer_id = customer.id
    return str(customer.id)


def _price_id(plan: Plan, interval: str) -> str:
    key = lookup_key(plan, interval)
    prices = client().v1.prices.list(params={"lookup_keys": [key], "active": True, "limit": 1})
    if not prices.data:
        raise BillingUnavailable(f"No Stripe price has lookup key {key}.")
    return str(prices.data[0].id)


def checkout_url_unsafe_in_transaction(user: User, plan: str, interval: str) -> str:
    chosen = parse_plan(plan)
    if chosen not in PURCHASABLE or interval not in INTERVALS:
        raise Conflict("Choose standard or pro, monthly or yearly.", code="invalid_plan")
    customer = ensure_customer_unsafe_in_transaction(user)
    try:
        session = client().v1.checkout.sessions.create(
            params={
                "mode": "subscription",
                "customer": customer,
                "client_reference_id": user.stable_user_id,
                "line_items": [{"price": _price_id(chosen, interval), "quantity": 1}],
                "success_url": f"{settings.SITE_URL}/account/billing/success"
                "?session_id={CHECKOUT_SESSION_ID}",
                "cancel_url": f"{settings.SITE_URL}/account/billing",
                "metadata": {"stable_user_id": user.stable_user_id},
            }
        )
    except stripe.StripeError as exc:
        raise BillingUnavailable() from exc
    arm_plan_refresh(user.stable_user_id)
    return str(session.url)


def portal_url_unsafe_in_transaction(user: User) -> str:
    if not user.stripe_customer_id:
        raise Conflict("There is no subscription to manage yet.", code="no_customer")
    try:
        session = client().v1.billing_portal.sessions.create(
            params={
                "customer": user.stripe_customer_id,
                "return_url": f"{settings.SITE_URL}/account/billing",
            }
        )
    except stripe.StripeError as exc:
        raise BillingUnavailable() from exc
    return str(session.url)


# --- plan refresh ----------------------------------------------------------------------------


def refresh_plan_unsafe_in_transaction(stable_user_id: str) -> Plan | None:
    """Store the best plan the user's Stripe customer pays for; returns it (None = free)."""
    user = User.objects.only("id", "stripe_customer_id", "stripe_plan").get(
        stable_user_id=stable_user_id
    )
    plan: Plan | None = None
    if user.stripe_customer_id:
        try:
            subs = client().v1.subscriptions.list(
                params={"customer": user.stripe_customer_id, "status": "all", "limit": 100}
            )
        except stripe.StripeError as exc:
            raise BillingUnavailable() from exc
        plan = best_paid_plan([sub.to_dict() for sub in subs.auto_paging_iter()])
    store_stripe_plan(stable_user_id, plan)
    return plan


def store_stripe_plan(stable_user_id: str, plan: Plan | None) -> None:
    with transaction.atomic():
        User.objects.filter(stable_user_id=stable_user_id).update(
            stripe_plan=plan.value if plan else None,
            stripe_plan_refreshed_at=timezone.now(),
        )
        invalidate_plan(stable_user_id)


def arm_plan_refresh(stable_user_id: str) -> None:
    """Backstop: a one-shot alarm re-reads Stripe later even if every webhook is lost."""
    from apps.entitlements.actor.stripe_refresh import arm_refresh

    try:
        arm_refresh(stable_user_id)
    except Exception:  # the backstop must never break the primary path
        log.exception("stripe_plan_refresh arm failed user=%s", stable_user_id)


# --- webhook ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WebhookResult:
    event_id: str
    event_type: str
    duplicate: bool
    stable_user_id: str | None


def verify_event(payload: bytes, signature: str) -> dict[str, Any]:
    if not settings.STRIPE_WEBHOOK_SECRET:
        raise BillingDisabled("Stripe webhooks are not configured.")
    try:
        event = stripe.Webhook.construct_event(payload, signature, settings.STRIPE_WEBHOOK_SECRET)
    except (ValueError, stripe.SignatureVerificationError) as exc:
        raise InvalidSignature() from exc
    return event.to_dict()


def _owner_of(obj: dict[str, Any]) -> str | None:
    reference = obj.get("client_reference_id") or (obj.get("metadata") or {}).get("stable_user_id")
    customer = obj.get("customer")
    if obj.get("object") == "customer":
        customer = obj.get("id")
    if customer:
        found = (
            User.objects.filter(stripe_customer_id=customer)
            .values_list("stable_user_id", flat=True)
            .first()
        )
        if found:
            return str(found)
    if reference and customer:
        # Checkout finished for a user whose customer id we have not stored yet.
        User.objects.filter(stable_user_id=reference, stripe_customer_id__isnull=True).update(
            stripe_customer_id=customer
        )
        if User.objects.filter(stable_user_id=reference, stripe_customer_id=customer).exists():
            return str(reference)
    return None


def handle_webhook_unsafe_in_transaction(payload: bytes, signature: str) -> WebhookResult:
    event = verify_event(payload, signature)
    event_id, event_type = str(event["id"]), str(event["type"])
    if StripeWebhookEvent.objects.filter(event_id=event_id).exists():
        return WebhookResult(event_id, event_type, True, None)
    owner = None
    if event_type in HANDLED_EVENTS:
        obj = event["data"]["object"]
        owner = _owner_of(obj)
        if owner and event_type == "invoice.paid" and int(obj.get("amount_paid") or 0) > 0:
            period_end = obj.get("period_end")
            referrals.reward_for_invoice(
                owner,
                str(obj.get("id")),
                datetime.fromtimestamp(int(period_end), UTC) if period_end else None,
            )
        if owner:
            arm_plan_refresh(owner)
            try:
                refresh_plan_unsafe_in_transaction(owner)
            except BillingUnavailable:
                log.warning("stripe refresh deferred to alarm user=%s event=%s", owner, event_id)
    first = record_event(event_id, event_type)
    return WebhookResult(event_id, event_type, not first, owner)


def record_event(event_id: str, event_type: str) -> bool:
    """Insert the ledger row; False when a concurrent delivery of the event recorded it first."""
    table = StripeWebhookEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (event_id, event_type, processed_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (event_id) DO NOTHING RETURNING event_id",
            [event_id, event_type, timezone.now()],
        )
        return cursor.fetchone() is not None


def prune_webhook_events(*, days: int = 30, batch: int = 1000) -> int:
    cutoff = timezone.now() - timedelta(days=days)
    ids = list(
        StripeWebhookEvent.objects.filter(processed_at__lt=cutoff)
        .order_by("processed_at")
        .values_list("event_id", flat=True)[:batch]
    )
    return StripeWebhookEvent.objects.filter(event_id__in=ids).delete()[0]
