"""``/auth/<provider>`` (start), its callback, and the signed-in connection pages
(``/account/connections.json``, unlink). Server-rendered; every refusal is a coded page."""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import policy
from apps.accounts.models import User
from apps.accounts.page_writes import guarded_page_write
from apps.accounts.services import onetime, social
from apps.accounts.services.sign_in_methods import sign_in_methods
from apps.accounts.social import flow, providers
from kody.errors import KodyError, NotFound, RateLimited

PASSWORD_BACKEND = "django.contrib.auth.backends.ModelBackend"
# Each start stores a pending state and sends the browser to the provider: bounded per client
# address and per session (operators tune the limits in settings).
START_WINDOW_SECONDS = 600


def _start_allowed(request: HttpRequest) -> bool:
    budgets = []
    ip = client_ip(request)
    if ip:
        budgets.append((f"ip:{ip}", settings.KODY_SOCIAL_START_PER_IP))
    session_key = request.session.session_key
    if session_key:
        budgets.append((f"session:{session_key}", settings.KODY_SOCIAL_START_PER_SESSION))
    allowed = [
        onetime.within_budget(
            "social-start", key, limit=int(limit), window_seconds=START_WINDOW_SECONDS
        )
        for key, limit in budgets
    ]
    return all(allowed)


def _too_many_starts(request: HttpRequest, conf: providers.Provider) -> HttpResponse:
    exc = RateLimited("Too many sign-in attempts from here. Wait a few minutes and try again.")
    response = _problem(request, exc, f"Not signed in with {conf.label}")
    response["Retry-After"] = str(START_WINDOW_SECONDS)
    return response


def client_ip(request: HttpRequest) -> str | None:
    return request.META.get("REMOTE_ADDR") or None  # as the account views: never forwarded-for


def _safe_next(request: HttpRequest, default: str) -> str:
    target = request.GET.get("next") or ""
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if allowed and target.startswith("/") else default


def _provider(name: str) -> providers.Provider:
    try:
        return providers.get(name)
    except NotFound:
        raise Http404 from None


def _problem(request: HttpRequest, exc: KodyError, title: str) -> HttpResponse:
    return render(
        request, "accounts/problem.html", {"title": title, "error": exc}, status=exc.status
    )


@never_cache
@require_http_methods(["GET", "POST"])
def start(request: HttpRequest, provider: str) -> HttpResponse:
    """GET: sign in (or sign up) with the provider. POST (the signed-in Connections page, so
    CSRF-checked): link the provider account to the signed-in account."""
    conf = _provider(provider)
    user = request.user
    if request.method == "POST":
        if not isinstance(user, User):
            return redirect_to_login(reverse("accounts:connections"))
        try:
            policy.assert_can_mutate(user)
        except KodyError as exc:
            return _problem(request, exc, f"{conf.label} not linked")
        if not _start_allowed(request):
            return _too_many_starts(request, conf)
        url = flow.begin(
            request,
            conf,
            intent="link",
            user_id=user.pk,
            next_url=reverse("accounts:connections"),
        )
        return HttpResponseRedirect(url)
    if user.is_authenticated:
        return redirect("accounts:connections")
    if not _start_allowed(request):
        return _too_many_starts(request, conf)
    next_url = _safe_next(request, settings.LOGIN_REDIRECT_URL)
    url = flow.begin(request, conf, intent="sign_in", user_id=None, next_url=next_url)
    return HttpResponseRedirect(url)


@never_cache
@require_GET
def callback(request: HttpRequest, provider: str) -> HttpResponse:
    conf = _provider(provider)
    try:
        pending, profile = flow.complete(request, conf)
    except KodyError as exc:
        return _problem(request, exc, f"Not signed in with {conf.label}")
    ip = client_ip(request)
    if pending.intent == "link":
        return _finish_link(request, conf, pending, profile, ip)
    try:
        result = social.sign_in(profile, ip=ip)
    except social.SignInToLink as exc:
        context = {"error": exc, "provider": conf, "login_next": reverse("accounts:connections")}
        return render(request, "accounts/social_sign_in_to_link.html", context, status=exc.status)
    except KodyError as exc:
        return _problem(request, exc, f"Not signed in with {conf.label}")
    auth_login(request, result.user, backend=PASSWORD_BACKEND)
    if result.created:
        messages.success(
            request,
            f"Welcome to Kody. Your account “{result.user.username}” is linked to {conf.label}.",
        )
    # With two-factor on, the session gate asks for a code before this page opens.
    return HttpResponseRedirect(pending.next_url)


def _finish_link(
    request: HttpRequest,
    conf: providers.Provider,
    pending: flow.Pending,
    profile: providers.Profile,
    ip: str | None,
) -> HttpResponse:
    user = request.user
    if not isinstance(user, User) or user.pk != pending.user_id:
        # Signed out, or signed in as someone else, since the link was started.
        return _problem(request, flow.StateMismatch(), f"{conf.label} not linked")
    try:
        with policy.write_guard(user, "ui:social_link"):
            _, created = social.link(user, profile, ip=ip)
    except KodyError as exc:
        return _problem(request, exc, f"{conf.label} not linked")
    if created:
        messages.success(
            request, f"{conf.label} ({profile.display_name}) is linked: use it to sign in."
        )
    else:
        messages.info(request, f"This {conf.label} account was already linked to yours.")
    return HttpResponseRedirect(pending.next_url)


@never_cache
@login_required
@require_GET
def connections_json(request: HttpRequest) -> JsonResponse:
    """Social logins of the signed-in account, and the providers it could link."""
    user = request.user
    assert isinstance(user, User)
    methods = sign_in_methods(user)
    return JsonResponse(
        {
            "connections": social.list_connections(user),
            "providers": [
                {"name": conf.name, "label": conf.label} for conf in providers.configured().values()
            ],
            "signInMethods": {
                "password": methods.password,
                "passkeys": methods.passkeys,
                "connections": methods.connections,
            },
        }
    )


@login_required
@require_POST
@guarded_page_write
def unlink(request: HttpRequest, connection_id: int) -> HttpResponse:
    user = request.user
    assert isinstance(user, User)
    try:
        connection = social.unlink(user, connection_id, ip=client_ip(request))
    except social.ConnectionNotFound:
        raise Http404 from None
    except KodyError as exc:
        return _problem(request, exc, "Not unlinked")
    label = providers.configured().get(connection.provider_name)
    messages.success(
        request,
        f"{label.label if label else connection.provider_name} is unlinked; it no longer signs "
        "you in.",
    )
    return redirect("accounts:connections")
