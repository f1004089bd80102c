"""Billing pages and the Stripe webhook: thin views over ``services``."""

from __future__ import annotations

import logging

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from apps.accounts import policy
from apps.accounts.models import User
from apps.entitlements import services
from apps.entitlements.plans import PRICES_CENTS, Plan
from apps.entitlements.services import billing
from kody.errors import KodyError

log = logging.getLogger(__name__)


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _billing_context(user: User) -> dict[str, object]:
    return {
        "billing_enabled": billing.billing_enabled(),
        "plan": services.plan_of(user),
        "operator_plan": user.plan,
        "stripe_plan": user.stripe_plan,
        "has_customer": bool(user.stripe_customer_id),
        "offers": [
            {
                "plan": plan.value,
                "label": plan.label,
                "month": prices["month"] / 100,
                "year": prices["year"] / 100,
            }
            for plan, prices in PRICES_CENTS.items()
        ],
        "max_plan": Plan.MAX.value,
    }


@never_cache
@login_required
@require_GET
def billing_page(request: HttpRequest) -> HttpResponse:
    return render(request, "entitlements/billing.html", _billing_context(_user(request)))


def _problem(request: HttpRequest, exc: KodyError) -> HttpResponse:
    context = {**_billing_context(_user(request)), "error": exc}
    return render(request, "entitlements/billing.html", context, status=exc.status)


@never_cache
@login_required
@require_POST
def checkout(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    try:
        policy.assert_can_mutate(user)
        url = billing.checkout_url_unsafe_in_transaction(
            user, request.POST.get("plan", ""), request.POST.get("interval", "month")
        )
    except KodyError as exc:
        return _problem(request, exc)
    return redirect(url)


@never_cache
@login_required
@require_POST
def checkout_json(request: HttpRequest) -> JsonResponse:
    user = _user(request)
    try:
        policy.assert_can_mutate(user)
        url = billing.checkout_url_unsafe_in_transaction(
            user, request.POST.get("plan", ""), request.POST.get("interval", "month")
        )
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return JsonResponse({"url": url})


@never_cache
@login_required
@require_POST
def portal(request: HttpRequest) -> HttpResponse:
    try:
        url = billing.portal_url_unsafe_in_transaction(_user(request))
    except KodyError as exc:
        return _problem(request, exc)
    return redirect(url)


@never_cache
@login_required
@require_GET
def checkout_success(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    if billing.billing_enabled():
        try:
            billing.refresh_plan_unsafe_in_transaction(user.stable_user_id)
        except KodyError:
            # The webhook or the refresh alarm will catch up; the page says so.
            log.warning("checkout success refresh failed user=%s", user.stable_user_id)
    messages.info(request, "Thanks! Your plan updates as soon as Stripe confirms the payment.")
    return redirect("entitlements:billing")


@csrf_exempt
@require_POST
def stripe_webhook(request: HttpRequest) -> JsonResponse:
    try:
        result = billing.handle_webhook_unsafe_in_transaction(
            request.body, request.headers.get("Stripe-Signature", "")
        )
    except KodyError as exc:
        return JsonResponse({"error": exc.as_dict()}, status=exc.status)
    return JsonResponse({"received": True, "duplicate": result.duplicate})


@never_cache
@login_required
@require_GET
def usage_json(request: HttpRequest) -> JsonResponse:
    return JsonResponse(services.usage_summary_json(_user(request)))
