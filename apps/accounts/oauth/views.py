"""The OAuth endpoints: the toolkit's views, with Kody's consent page and metadata on top."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth.models import AnonymousUser
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.decorators import method_decorator
from django.views.decorators.cache import never_cache
from oauth2_provider.exceptions import OAuthToolkitError
from oauth2_provider.forms import AllowForm
from oauth2_provider.models import get_application_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.views import AuthorizationView, DynamicClientRegistrationView
from oauth2_provider.views.metadata import (
    OAuthProtectedResourceMetadataView,
    OAuthServerMetadataView,
)
from oauthlib.oauth2.rfc6749.errors import CustomOAuth2Error

from apps.accounts import policy
from apps.accounts.oauth import grants
from apps.accounts.oauth.validator import foreign_resources, mcp_resource


class ProtectedResourceMetadata(OAuthProtectedResourceMetadataView):
    """RFC 9728 for ``/mcp``: served at the root form and at the ``/mcp`` path form."""

    def get_resource(self, request: HttpRequest) -> str:
        return mcp_resource()


class ServerMetadata(OAuthServerMetadataView):
    """RFC 8414, limited to what this server does: code + PKCE S256, refresh, public clients."""

    def get(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = super().get(request, *args, **kwargs)
        data = json.loads(response.content)
        data["code_challenge_methods_supported"] = ["S256"]
        data.pop("introspection_endpoint", None)
        data.pop("introspection_endpoint_auth_methods_supported", None)
        out = JsonResponse(data)
        out["Access-Control-Allow-Origin"] = "*"
        return out


@method_decorator(never_cache, name="dispatch")
class ConsentView(AuthorizationView):
    """The signed-in consent page: client, redirect host, scopes, remember-this-client, deny."""

    template_name = "accounts/oauth_consent.html"

    def render_to_response(self, context: dict[str, Any], **kwargs: Any) -> HttpResponse:
        application = context.get("application")
        if application is None or context.get("error"):
            return super().render_to_response(context, **kwargs)
        resources = str(context.get("resource") or "").split()
        if foreign_resources(resources):
            return self._refuse(
                context, "invalid_target", f"This server issues tokens only for {mcp_resource()}."
            )
        if context.get("code_challenge_method") != "S256":
            # Asked before the person is: a plain challenge would only fail after consent.
            return self._refuse(context, "invalid_request", "PKCE with S256 is required.")
        scopes = list(context.get("scopes") or [])
        user = self.request.user
        if not policy.may_act(user):
            refusal = {
                "error": "account_unavailable",
                "description": "This account cannot connect agents right now.",
            }
            return super().render_to_response({"error": refusal}, status=403)
        if grants.remembered(user, application, scopes):
            form = AllowForm(data={**self.get_initial(), "allow": True})
            if form.is_valid():
                return self.form_valid(form)
        all_scopes = get_scopes_backend().get_all_scopes()
        context["scope_rows"] = [(scope, all_scopes.get(scope, scope)) for scope in scopes]
        context["redirect_host"] = urlsplit(str(context.get("redirect_uri") or "")).netloc
        context["client_label"] = application.name or application.client_id
        return super().render_to_response(context, **kwargs)

    def _refuse(self, context: dict[str, Any], code: str, description: str) -> HttpResponse:
        error = OAuthToolkitError(
            error=CustomOAuth2Error(
                error=code, description=description, state=context.get("state")
            ),
            redirect_uri=context.get("redirect_uri"),
        )
        return self.error_response(error, context["application"])

    def form_valid(self, form: AllowForm) -> HttpResponse:
        response = super().form_valid(form)
        location = response.get("Location", "")
        if form.cleaned_data.get("allow") and "code=" in location:
            application = get_application_model().objects.get(
                client_id=form.cleaned_data["client_id"]
            )
            remember = self.request.POST.get("remember") == "on" or grants.remembered(
                self.request.user, application, form.cleaned_data["scope"].split()
            )
            grants.approve(
                self.request.user,
                application,
                form.cleaned_data["scope"].split(),
                remember=remember,
            )
        return response


class Registration(DynamicClientRegistrationView):
    """RFC 7591 open registration. A client belongs to nobody: a browser session that happens
    to be signed in does not make the registered client that person's row."""

    def post(self, request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        request.user = AnonymousUser()
        if not _registration_slot(request.META.get("REMOTE_ADDR") or "unknown"):
            body = {
                "error": "rate_limited",
                "error_description": "Too many client registrations from this address.",
            }
            response = JsonResponse(body, status=429)
            response["Retry-After"] = str(REGISTRATION_WINDOW_SECONDS)
            return response
        return super().post(request, *args, **kwargs)


# Open registration costs an application row each: bounded per address and hour. A client
# registers once per install; clients nobody ever approved are purged after a day.
REGISTRATION_WINDOW_SECONDS = 3600


def registration_limit() -> int:
    from django.conf import settings

    return int(settings.KODY_OAUTH_REGISTRATIONS_PER_HOUR)


def _registration_slot(ip: str) -> bool:
    import time

    from django.core.cache import cache

    key = f"oauth-register:{ip}:{int(time.time() // REGISTRATION_WINDOW_SECONDS)}"
    cache.add(key, 0, timeout=REGISTRATION_WINDOW_SECONDS)
    try:
        count = cache.incr(key)
    except ValueError:
        cache.set(key, 1, timeout=REGISTRATION_WINDOW_SECONDS)
        count = 1
    return count <= registration_limit()
