"""Tips mail on the account UI: the settings toggle and the one-click unsubscribe link.

The link's GET only shows a confirm button: mail scanners and link previews fetch GET links,
and must not opt anyone out. The POST opts out. Mail providers that honour RFC 8058 POST
``List-Unsubscribe=One-Click`` to the same URL (token in the query) without a session or a
CSRF token, so that POST is CSRF-exempt: the signed token is what authorises it, and all it
can do is stop tips mail for the account it names.
"""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_http_methods

from apps.accounts.models import User
from apps.accounts.policy import write_guard
from apps.accounts.services import tips
from kody.errors import InvalidInput, KodyError

CHOICES = {"on": False, "off": True}  # the form's value -> opted out


def _problem(request: HttpRequest, exc: KodyError, title: str) -> HttpResponse:
    context = {"title": title, "error": exc}
    return render(request, "accounts/problem.html", context, status=exc.status)


def settings_tips_email(request: HttpRequest) -> HttpResponse:
    """POST ``/account/settings/tips-email``: the signed-in person's own preference, only."""
    assert isinstance(request.user, User)
    choice = request.POST.get("tips_email", "")
    if choice not in CHOICES:
        exc = InvalidInput("Choose whether to get Kody tips.", details={"field": "tips_email"})
        return _problem(request, exc, "Tips mail not changed")
    opted_out = tips.set_opted_out(request.user, CHOICES[choice])
    messages.success(
        request, "You will get no Kody tips mail." if opted_out else "Kody tips mail is on."
    )
    return redirect("accounts:settings")


@never_cache
@csrf_exempt
@require_http_methods(["GET", "POST"])
def unsubscribe(request: HttpRequest) -> HttpResponse:
    token = request.POST.get("token") or request.GET.get("token", "")
    title = "Tips mail not changed"
    try:
        user = tips.user_for_token(token)
    except KodyError as exc:
        return _problem(request, exc, title)
    context = {"token": token, "username": user.username}
    if request.method == "GET":
        context["already"] = tips.is_opted_out(user)
        return render(request, "accounts/tips_unsubscribe.html", context)
    try:
        # The same guard as a page write: refused once the account is being deleted, so no
        # opt-out row lands after the deletion has removed the account's rows.
        with write_guard(user, "ui:tips_unsubscribe"):
            tips.set_opted_out(user, True)
    except KodyError as exc:
        return _problem(request, exc, title)
    return render(request, "accounts/tips_unsubscribe_done.html", context)
