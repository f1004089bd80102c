"""A session lives only while its account may act: suspension ends every signed-in session;
and the referral attribution cookie.

Runs after Django's AuthenticationMiddleware, on every page (account UI and ``/admin/``). The
request's user row is loaded fresh for each request, so a suspension takes effect at the next
request of every session, without a session store sweep.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import logout
from django.http import HttpRequest, HttpResponse

from apps.accounts import policy
from apps.accounts.services import audit, referrals


class AccountGateMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        user = request.user
        if user.is_authenticated and not policy.may_sign_in(user):
            audit.record(
                category="auth",
                action="session_end",
                result="failure",
                email=user.email,
                ip=request.META.get("REMOTE_ADDR") or None,
                reason="account_suspended",
            )
            logout(request)
        return self.get_response(request)


class ReferralCookieMiddleware:
    """``?ref=<username>`` on any page sets the week-long ``kody_ref`` attribution cookie."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if "ref" in request.GET and not request.user.is_authenticated:
            referrals.remember(request, response)
        return response
