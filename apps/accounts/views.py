"""Account UI: thin views over the identity and token services; server-rendered, no JavaScript."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login as auth_login
from django.contrib.auth import logout as auth_logout
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts import forms, time_zones
from apps.accounts.models import User
from apps.accounts.page_writes import guarded_page_write
from apps.accounts.services import identity, referrals, tips, tokens
from apps.entitlements import plans
from apps.entitlements.services import usage_summary
from kody.errors import KodyError

View = Callable[..., HttpResponse]


def client_ip(request: HttpRequest) -> str | None:
    # REMOTE_ADDR only: a forwarded-for header is client-controlled unless a proxy rewrites it.
    return request.META.get("REMOTE_ADDR") or None


def _user(request: HttpRequest) -> User:
    assert isinstance(request.user, User)
    return request.user


def _render(
    request: HttpRequest, template: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    return render(request, f"accounts/{template}", context, status=status)


def _problem(request: HttpRequest, exc: KodyError, *, title: str) -> HttpResponse:
    return _render(request, "problem.html", {"title": title, "error": exc}, status=exc.status)


def _form_status(exc: KodyError) -> int:
    # A 401 needs a WWW-Authenticate challenge; a form page with a wrong password answers 400.
    return 400 if exc.status == 401 else exc.status


def mutation(view: View) -> View:
    """Signed-in POST handlers: each change runs inside the account write guard, as a mutating
    capability does (refused once the account is being deleted; the deletion's drain waits for
    one in flight)."""
    return login_required(require_POST(guarded_page_write(view)))


def refused_while_deleting(view: View) -> View:
    """Signed-in POSTs that write none of the account's data (a verification mail): refused
    once the account is being deleted, without a write lease — an unverified signup has no
    actor state, and taking a lease would create it."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        try:
            identity.assert_can_mutate(_user(request))
        except KodyError as exc:
            return _problem(request, exc, title="Account is being deleted")
        return view(request, *args, **kwargs)

    return login_required(require_POST(wrapper))


def _safe_next(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    allowed = url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    )
    return target if allowed and target.startswith("/") else default


# --- signup, login, logout ------------------------------------------------------------------


@never_cache
@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("accounts:home")
    form = forms.SignupForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                identity.signup(
                    **form.cleaned_data,
                    ip=client_ip(request),
                    path=request.path,
                    referrer=referrals.referrer_username(request),
                )
            except KodyError as exc:
                form.add_service_error(exc)
                status = exc.status
            else:
                return redirect("accounts:signup_done")
    return _render(request, "signup.html", {"form": form}, status=status)


@require_GET
def signup_done(request: HttpRequest) -> HttpResponse:
    return _render(request, "signup_done.html", {})


@never_cache
@require_http_methods(["GET", "POST"])
def login(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request, settings.LOGIN_REDIRECT_URL)
    if request.user.is_authenticated:
        return HttpResponseRedirect(next_url)
    form = forms.LoginForm(request.POST or None)
    status = 200
    if request.method == "POST":
        status = 400
        if form.is_valid():
            try:
                user = identity.authenticate_login(
                    form.cleaned_data["identifier"],
                    form.cleaned_data["password"],
                    ip=client_ip(request),
                )
            except KodyError as exc:
                form.add_service_error(exc)
                status = _form_status(exc)
            else:
                auth_login(request, user, backend="django.contrib.auth.backends.ModelBackend")
                return HttpResponseRedirect(next_url)
    return _render(request, "login.html", {"form": form, "next": next_url}, status=status)


@require_POST
def logout(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        identity.record_logout(_user(request), ip=client_ip(request))
    auth_logout(request)
    messages.success(request, "You are signed out.")
    return redirect("accounts:login")


# --- one-time links -------------------------------------------------------------------------


def _token_page(
    request: HttpRequest,
    *,
    template: str,
    done_template: str,
    action: Callable[[str], Any],
    title: str,
) -> HttpResponse:
    """GET shows a confirm button (mail scanners that prefetch links must not burn tokens);
    POST consumes the token."""
    if request.method == "GET":
        token = request.GET.get("token", "")
        if not token:
            raise Http404
        form = forms.TokenForm(initial={"token": token})
        return _render(request, template, {"form": form})
    form = forms.TokenForm(request.POST)
    if not form.is_valid():
        raise Http404
    try:
        result = action(form.cleaned_data["token"])
    except KodyError as exc:
        return _problem(request, exc, title=title)
    return _render(request, done_template, {"result": result})


@never_cache
@require_http_methods(["GET", "POST"])
def verify(request: HttpRequest) -> HttpResponse:
    ip = client_ip(request)
    return _token_page(
        request,
        template="verify.html",
        done_template="verify_done.html",
        action=lambda token: identity.verify_email(token, ip=ip),
        title="Email not verified",
    )


@refused_while_deleting
def resend_verification(request: HttpRequest) -> HttpResponse:
    try:
        sent = identity.resend_verification(_user(request))
    except KodyError as exc:
        return _problem(request, exc, title="Verification email not sent")
    if sent:
        messages.success(request, f"We sent a new verification link to {request.user.email}.")
    else:
        messages.info(request, "Your email address is already verified.")
    return redirect("accounts:home")


@never_cache
@require_http_methods(["GET", "POST"])
def reset_request(request: HttpRequest) -> HttpResponse:
    form = forms.EmailForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            identity.request_password_reset(form.cleaned_data["email"], ip=client_ip(request))
        except KodyError as exc:
            form.add_service_error(exc)
        else:
            return _render(request, "reset_sent.html", {"email": form.cleaned_data["email"]})
    status = 400 if form.errors else 200
    return _render(request, "reset_request.html", {"form": form}, status=status)


@never_cache
@require_http_methods(["GET", "POST"])
def reset_confirm(request: HttpRequest) -> HttpResponse:
    if request.method == "GET":
        token = request.GET.get("token", "")
        try:
            identity.check_reset_token(token)
        except KodyError as exc:
            return _problem(request, exc, title="Password not reset")
        form = forms.SetPasswordForm(initial={"token": token})
        return _render(request, "reset_confirm.html", {"form": form})
    form = forms.SetPasswordForm(request.POST)
    if form.is_valid():
        try:
            identity.reset_password(
                form.cleaned_data["token"], form.cleaned_data["password"], ip=client_ip(request)
            )
        except (
            identity.InvalidToken,
            identity.TokenExpired,
            identity.AccountDeleting,
            identity.AccountSuspended,
        ) as exc:
            return _problem(request, exc, title="Password not reset")
        except KodyError as exc:
            form.add_service_error(exc)
        else:
            messages.success(request, "Your password is changed. Sign in with the new one.")
            return redirect("accounts:login")
    return _render(request, "reset_confirm.html", {"form": form}, status=400)


@never_cache
@require_http_methods(["GET", "POST"])
def email_change_confirm(request: HttpRequest) -> HttpResponse:
    ip = client_ip(request)
    return _token_page(
        request,
        template="email_confirm.html",
        done_template="email_confirm_done.html",
        action=lambda token: identity.confirm_email_change(token, ip=ip),
        title="Email not changed",
    )


@never_cache
@require_http_methods(["GET", "POST"])
def email_release_confirm(request: HttpRequest) -> HttpResponse:
    ip = client_ip(request)
    return _token_page(
        request,
        template="email_release.html",
        done_template="email_release_done.html",
        action=lambda token: identity.confirm_claim_release(token, ip=ip),
        title="Address not released",
    )


# --- account pages --------------------------------------------------------------------------


@never_cache
@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    from apps.accounts import home as summary

    user = _user(request)
    context = {
        "account": user,
        "plan": _plan(user).label,
        "sections": summary.sections(user),
        "next_step": summary.next_step(user),
        "token_count": sum(1 for t in tokens.list_tokens(user) if t.kind == "pat"),
    }
    return _render(request, "home.html", context)


def _connections(
    request: HttpRequest,
    form: forms.CreateTokenForm,
    *,
    created: Any = None,
    plaintext: str | None = None,
    status: int = 200,
) -> HttpResponse:
    from apps.accounts.oauth import grants

    user = _user(request)
    mcp_url = settings.SITE_URL.rstrip("/") + "/mcp"
    context = {
        "tokens": [t for t in tokens.list_tokens(user) if t.kind == "pat"],
        "grants": grants.list_grants(user),
        "mcp_url": mcp_url,
        "setup": setup_snippets(mcp_url),
        "form": form,
        "created": created,
        "plaintext": plaintext,
    }
    return _render(request, "connections.html", context, status=status)


@never_cache
@login_required
@require_GET
def connections(request: HttpRequest) -> HttpResponse:
    return _connections(request, forms.CreateTokenForm())


@never_cache
@mutation
def token_create(request: HttpRequest) -> HttpResponse:
    form = forms.CreateTokenForm(request.POST)
    if form.is_valid():
        try:
            token, plaintext = tokens.create_token(
                _user(request), form.cleaned_data["name"], ip=client_ip(request)
            )
        except KodyError as exc:
            form.add_service_error(exc)
            return _connections(request, form, status=exc.status)
        # Rendered in the POST response, never stored: the secret is shown exactly once.
        return _connections(
            request, forms.CreateTokenForm(), created=token, plaintext=plaintext, status=201
        )
    return _connections(request, form, status=400)


@mutation
def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    try:
        token = tokens.revoke_token(_user(request), token_id, ip=client_ip(request))
    except tokens.TokenNotFound:
        raise Http404 from None
    messages.success(request, f"Token “{token.name}” is revoked; agents using it are cut off.")
    return redirect("accounts:connections")


def setup_snippets(mcp_url: str) -> list[tuple[str, str, str]]:
    """(id, label, text) for each common MCP client: ready to paste, nothing to fill in."""
    import json

    cursor = {"mcpServers": {"kody": {"url": mcp_url}}}
    vscode = {"servers": {"kody": {"type": "http", "url": mcp_url}}}
    desktop = {"mcpServers": {"kody": {"type": "http", "url": mcp_url}}}
    return [
        ("setup-claude-code", "Claude Code", f"claude mcp add --transport http kody {mcp_url}"),
        ("setup-claude-desktop", "Claude Desktop", json.dumps(desktop, indent=2)),
        ("setup-cursor", "Cursor (~/.cursor/mcp.json)", json.dumps(cursor, indent=2)),
        ("setup-vscode", "VS Code (.vscode/mcp.json)", json.dumps(vscode, indent=2)),
    ]


@mutation
def grant_revoke(request: HttpRequest, grant_id: int) -> HttpResponse:
    from apps.accounts.oauth import grants

    try:
        grant = grants.revoke_grant(_user(request), grant_id, ip=client_ip(request))
    except grants.GrantNotFound:
        raise Http404 from None
    name = grant.client_name or grant.client_id
    messages.success(request, f"“{name}” is disconnected; it must ask you again to reconnect.")
    return redirect("accounts:connections")


@never_cache
@login_required
@require_GET
def usage(request: HttpRequest) -> HttpResponse:
    return _render(request, "usage.html", {"usage": _usage_summary(_user(request))})


def _settings_page(
    request: HttpRequest,
    *,
    email_form: forms.EmailChangeForm | None = None,
    experiments_form: forms.ExperimentsForm | None = None,
    status: int = 200,
) -> HttpResponse:
    user = _user(request)
    context = {
        "account": user,
        "email_form": email_form or forms.EmailChangeForm(),
        "experiments_form": experiments_form
        or forms.ExperimentsForm(initial={"experiments_opt_in": user.experiments_opt_in}),
        "former_emails": identity.former_emails(user),
        "time_zones": time_zones.choices(),
        "time_zone": user.time_zone or time_zones.UTC,
        "tips_opted_out": tips.is_opted_out(user),
    }
    return _render(request, "settings.html", context, status=status)


@never_cache
@login_required
@require_GET
def settings_page(request: HttpRequest) -> HttpResponse:
    return _settings_page(request)


@mutation
def settings_email(request: HttpRequest) -> HttpResponse:
    form = forms.EmailChangeForm(request.POST)
    if form.is_valid():
        try:
            identity.request_email_change(
                _user(request),
                form.cleaned_data["new_email"],
                form.cleaned_data["password"],
                ip=client_ip(request),
            )
        except KodyError as exc:
            form.add_service_error(exc)
            return _settings_page(request, email_form=form, status=_form_status(exc))
        messages.success(
            request,
            f"We sent a confirmation link to {form.cleaned_data['new_email']}. Your login email "
            "changes when you open it.",
        )
        return redirect("accounts:settings")
    return _settings_page(request, email_form=form, status=400)


@mutation
def settings_experiments(request: HttpRequest) -> HttpResponse:
    form = forms.ExperimentsForm(request.POST)
    form.is_valid()  # a boolean checkbox is always valid
    enabled = bool(form.cleaned_data.get("experiments_opt_in"))
    identity.set_experiments_opt_in(_user(request), enabled)
    messages.success(
        request, "Experimental features are on." if enabled else "Experimental features are off."
    )
    return redirect("accounts:settings")


@mutation
def settings_release_email(request: HttpRequest) -> HttpResponse:
    form = forms.ReleaseEmailForm(request.POST)
    if not form.is_valid():
        raise Http404
    try:
        identity.request_claim_release(
            _user(request), form.cleaned_data["email"], ip=client_ip(request)
        )
    except KodyError as exc:
        return _problem(request, exc, title="Address not released")
    messages.success(
        request,
        f"We sent a link to {form.cleaned_data['email']}. Open it there to release the address.",
    )
    return redirect("accounts:settings")


# --- usage ----------------------------------------------------------------------------------


def _plan(user: User) -> plans.Plan:
    return plans.effective_plan_for(user, now=timezone.now())


def _usage_summary(user: User) -> dict[str, Any]:
    summary = usage_summary(user)
    return {
        "plan": summary.get("plan_label") or str(summary.get("plan", "")).capitalize(),
        "entitlements": summary,
        "metered": bool(summary.get("metered")),
    }
