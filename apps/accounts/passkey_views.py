"""``/account/passkeys`` (list, rename, remove) and the ``/webauthn/*`` JSON steps that
``static/kody-passkeys.js`` drives: add a passkey, sign in with one, or use one as the second
factor of a password sign-in. Each ceremony is two requests: ``…/options`` mints a challenge
kept in the session, the next POST answers it."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from apps.accounts import two_factor_gate
from apps.accounts.models import User
from apps.accounts.page_writes import guarded_page_write
from apps.accounts.services import passkeys
from apps.accounts.views import _safe_next, client_ip, mutation
from kody.errors import KodyError, Unauthenticated

BACKEND = "django.contrib.auth.backends.ModelBackend"


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _options(body: str) -> HttpResponse:
    return HttpResponse(body, content_type="application/json")


def _error(exc: KodyError) -> JsonResponse:
    return JsonResponse({"error": exc.as_dict()}, status=exc.status)


def _signed_in(request: HttpRequest) -> User:
    if not request.user.is_authenticated:
        raise Unauthenticated("Sign in first.")
    return _user(request)


# --- the account page -------------------------------------------------------------------------


@never_cache
@login_required
@require_GET
def passkeys_page(request: HttpRequest) -> HttpResponse:
    context = {"passkeys": passkeys.for_user(_user(request)), "name_max": passkeys.NAME_MAX}
    return render(request, "accounts/passkeys.html", context)


@mutation
def passkey_rename(request: HttpRequest, passkey_id: str) -> HttpResponse:
    try:
        key = passkeys.rename(
            _user(request), passkey_id, request.POST.get("name", ""), ip=client_ip(request)
        )
    except KodyError as exc:
        context = {"title": "Passkey not renamed", "error": exc}
        return render(request, "accounts/problem.html", context, status=exc.status)
    messages.success(request, f"Renamed to “{key.name}”.")
    return redirect("accounts:passkeys")


@mutation
def passkey_delete(request: HttpRequest, passkey_id: str) -> HttpResponse:
    try:
        passkeys.remove(_user(request), passkey_id, ip=client_ip(request))
    except KodyError as exc:
        context = {"title": "Passkey not removed", "error": exc}
        return render(request, "accounts/problem.html", context, status=exc.status)
    messages.success(request, "Passkey removed. It no longer signs you in.")
    return redirect("accounts:passkeys")


# --- /webauthn/register -----------------------------------------------------------------------


@never_cache
@require_POST
def register_options(request: HttpRequest) -> HttpResponse:
    try:
        user = _signed_in(request)
        return _options(passkeys.registration_options(request.session, user))
    except KodyError as exc:
        return _error(exc)


@never_cache
@require_POST
@guarded_page_write
def register(request: HttpRequest) -> HttpResponse:
    try:
        user = _signed_in(request)
        raw, name = passkeys.credential_json(request.body)
        key = passkeys.register(request.session, user, raw, name, ip=client_ip(request))
    except KodyError as exc:
        return _error(exc)
    messages.success(request, f"Passkey “{key.name}” added.")
    body = {"passkey": {"id": key.id, "name": key.name}, "redirect": reverse("accounts:passkeys")}
    return JsonResponse(body)


# --- /webauthn/authenticate: sign in ----------------------------------------------------------


@never_cache
@require_POST
def authenticate_options(request: HttpRequest) -> HttpResponse:
    return _options(passkeys.authentication_options(request.session))


@never_cache
@require_POST
def authenticate(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request, reverse("accounts:home"))
    try:
        raw, _ = passkeys.credential_json(request.body)
        key = passkeys.authenticate(request.session, raw, ip=client_ip(request))
    except KodyError as exc:
        return _error(exc)
    if request.user.is_authenticated and request.user.pk != key.user_id:
        # Another person's session in this browser ends before this one starts.
        request.session.flush()
    auth_login(request, key.user, backend=BACKEND)
    two_factor_gate.mark_signed_in_with_passkey(request)
    return JsonResponse({"redirect": next_url})


# --- /webauthn/verify: a passkey as the second factor -----------------------------------------


@never_cache
@require_POST
def verify_options(request: HttpRequest) -> HttpResponse:
    try:
        user = _signed_in(request)
        two_factor_gate.require_passkey_may_verify(request)
        return _options(passkeys.authentication_options(request.session, user))
    except KodyError as exc:
        return _error(exc)


@never_cache
@require_POST
def verify(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request, reverse("accounts:home"))
    try:
        user = _signed_in(request)
        two_factor_gate.require_passkey_may_verify(request)
        raw, _ = passkeys.credential_json(request.body)
        key = passkeys.authenticate(request.session, raw, user=user, ip=client_ip(request))
    except KodyError as exc:
        return _error(exc)
    two_factor_gate.mark_verified_with_passkey(request, key.pk)
    return JsonResponse({"redirect": next_url})
