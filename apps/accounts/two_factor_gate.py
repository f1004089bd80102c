"""With two-factor on, a signed-in session reaches nothing — account pages, the admin, the OAuth
consent page — until a second factor is given at ``/account/two-factor/verify``: a code from
the authenticator app, a recovery code, or (after a password sign-in) one of the person's
passkeys. Password sign-in, passkey sign-in and the admin's own login all end here, so one gate
covers every way in. A passkey sign-in still asks for a code: the passkey was the first factor
and cannot also be the second. Bearer-token requests (the API, ``/mcp``) carry no session user
and are not affected."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from apps.accounts.models import Passkey
from apps.accounts.services import two_factor
from kody.errors import Forbidden

OPEN_PREFIXES = ("/static/", "/logout", "/account/two-factor/verify", "/webauthn/verify")
SIGNED_IN_WITH = "kody.signed_in_with"
PASSKEY_VERIFIED = "kody.two_factor.passkey"


def mark_signed_in_with_passkey(request: HttpRequest) -> None:
    request.session[SIGNED_IN_WITH] = "passkey"


def passkey_may_verify(request: HttpRequest) -> bool:
    """A passkey is a second factor only when it was not the first one."""
    return request.session.get(SIGNED_IN_WITH) != "passkey"


def require_passkey_may_verify(request: HttpRequest) -> None:
    if not passkey_may_verify(request):
        raise Forbidden("You signed in with a passkey; the second step needs a code from your app.")


def mark_verified_with_passkey(request: HttpRequest, passkey_id: str) -> None:
    request.session[PASSKEY_VERIFIED] = passkey_id


def session_verified(request: HttpRequest) -> bool:
    """The session has given its second factor (a passkey removed since no longer counts)."""
    user = request.user
    if user.is_verified():  # type: ignore[union-attr]
        return True
    passkey_id = request.session.get(PASSKEY_VERIFIED)
    return bool(passkey_id) and Passkey.objects.filter(pk=passkey_id, user_id=user.pk).exists()


class TwoFactorGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and not request.path.startswith(OPEN_PREFIXES)
            and not session_verified(request)
            and two_factor.enabled(user)
        ):
            target = reverse("accounts:two_factor_verify")
            return HttpResponseRedirect(f"{target}?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)
