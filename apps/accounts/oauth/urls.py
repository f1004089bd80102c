"""Mounted at the site root under the toolkit's namespace, which its metadata views reverse."""

from django.urls import path
from oauth2_provider import views as toolkit

from apps.accounts.oauth import views

app_name = "oauth2_provider"

urlpatterns = [
    path(
        ".well-known/oauth-authorization-server",
        views.ServerMetadata.as_view(),
        name="oauth-server-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource",
        views.ProtectedResourceMetadata.as_view(),
        name="oauth-resource-metadata",
    ),
    path(
        ".well-known/oauth-protected-resource/mcp",
        views.ProtectedResourceMetadata.as_view(),
        name="oauth-resource-metadata-mcp",
    ),
    path("oauth/authorize", views.ConsentView.as_view(), name="authorize"),
    path("oauth/token", toolkit.TokenView.as_view(), name="token"),
    path("oauth/revoke", toolkit.RevokeTokenView.as_view(), name="revoke-token"),
    path("oauth/register", views.Registration.as_view(), name="dcr-register"),
    path(
        "oauth/register/<str:client_id>",
        toolkit.DynamicClientRegistrationManagementView.as_view(),
        name="dcr-register-management",
    ),
]
