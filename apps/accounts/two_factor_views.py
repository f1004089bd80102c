"""``/account/two-factor`` (turn TOTP on or off, recovery codes) and the code prompt that a
session with two-factor on must pass before anything else (``two_factor_gate``)."""

from __future__ import annotations

import base64

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_otp import login as otp_login

from apps.accounts.models import Passkey, User
from apps.accounts.services import two_factor
from apps.accounts.two_factor_gate import passkey_may_verify, session_verified
from apps.accounts.views import _safe_next, client_ip
from kody.errors import KodyError


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _page(request: HttpRequest, context: dict[str, object], status: int = 200) -> HttpResponse:
    user = _user(request)
    device = two_factor.pending(user)
    base = {
        "enabled": two_factor.enabled(user),
        "pending": device,
        "secret": base64.b32encode(device.bin_key).decode() if device else "",
        "remaining": two_factor.remaining_recovery_codes(user),
    }
    return render(request, "accounts/two_factor.html", {**base, **context}, status=status)


@never_cache
@login_required
@require_http_methods(["GET"])
def two_factor_page(request: HttpRequest) -> HttpResponse:
    return _page(request, {})


@never_cache
@login_required
@require_POST
def two_factor_change(request: HttpRequest) -> HttpResponse:
    user, ip = _user(request), client_ip(request)
    action = request.POST.get("action")
    try:
        if action == "start":
            two_factor.start(user)
            return redirect("accounts:two_factor")
        if action == "confirm":
            codes = two_factor.confirm(user, request.POST.get("code", ""), ip=ip)
            otp_login(request, two_factor.verify_device_for_session(user))
            return _page(request, {"codes": codes})
        if action == "regenerate":
            return _page(request, {"codes": two_factor.regenerate(user, ip=ip)})
        if action == "disable":
            two_factor.disable(user, request.POST.get("code", ""), ip=ip)
            return redirect("accounts:two_factor")
    except KodyError as exc:
        return _page(request, {"error": exc}, status=exc.status)
    return _page(request, {"error": "Unknown action."}, status=400)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def two_factor_verify(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request, reverse("accounts:home"))
    user = _user(request)
    if not two_factor.enabled(user) or session_verified(request):
        return HttpResponseRedirect(next_url)
    error = ""
    if request.method == "POST":
        device = two_factor.verify(user, request.POST.get("code", ""), ip=client_ip(request))
        if device is not None:
            otp_login(request, device)
            return HttpResponseRedirect(next_url)
        error = "That code is not valid. Try the one your app shows now, or a recovery code."
    offer_passkey = passkey_may_verify(request) and Passkey.objects.filter(user=user).exists()
    context = {"next": next_url, "error": error, "offer_passkey": offer_passkey}
    return render(request, "accounts/two_factor_verify.html", context, status=400 if error else 200)
