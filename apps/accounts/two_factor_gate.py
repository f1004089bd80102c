"""With two-factor on, a signed-in session reaches nothing — account pages, the admin, the OAuth
consent page — until a code is given at ``/account/two-factor/verify``. Password sign-in and
the admin's own login both end here, so one gate covers every way in. Bearer-token requests
(the API, ``/mcp``) carry no session user and are not affected."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse

from apps.accounts.services import two_factor

OPEN_PREFIXES = ("/static/", "/logout", "/account/two-factor/verify")


class TwoFactorGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = getattr(request, "user", None)
        if (
            user is not None
            and user.is_authenticated
            and not request.path.startswith(OPEN_PREFIXES)
            and not user.is_verified()
            and two_factor.enabled(user)
        ):
            target = reverse("accounts:two_factor_verify")
            return HttpResponseRedirect(f"{target}?{urlencode({'next': request.get_full_path()})}")
        return self.get_response(request)
