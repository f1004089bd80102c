"""The curated registry's first rows: well-known providers and their public endpoints.

Operators edit them (and add more) in Django admin; this only inserts rows that are missing.
"""

from __future__ import annotations

from typing import Any

from django.db import migrations

PROVIDERS: list[dict[str, Any]] = [
    {
        "slug": "github",
        "label": "GitHub",
        "authorize_url": "https://github.com/login/oauth/authorize",
        "token_url": "https://github.com/login/oauth/access_token",
        "api_base_url": "https://api.github.com",
        "flow": "confidential",
        "token_exchange_style": "form",
        "default_scopes_json": ["repo", "read:user"],
        "required_hosts_json": ["api.github.com"],
        "aliases_json": ["github.com", "gh"],
        "docs_url": "https://docs.github.com/en/apps/oauth-apps",
    },
    {
        "slug": "google",
        "label": "Google",
        "authorize_url": "https://accounts.google.com/o/oauth2/v2/auth",
        "token_url": "https://oauth2.googleapis.com/token",
        "api_base_url": "https://www.googleapis.com",
        "flow": "confidential",
        "token_exchange_style": "form",
        "extra_authorize_params_json": {"access_type": "offline", "prompt": "consent"},
        "default_scopes_json": ["openid", "email"],
        "required_hosts_json": ["www.googleapis.com"],
        "aliases_json": ["accounts.google.com", "gmail", "google-drive"],
        "docs_url": "https://developers.google.com/identity/protocols/oauth2/web-server",
    },
    {
        "slug": "slack",
        "label": "Slack",
        "authorize_url": "https://slack.com/oauth/v2/authorize",
        "token_url": "https://slack.com/api/oauth.v2.access",
        "api_base_url": "https://slack.com/api",
        "flow": "confidential",
        "token_exchange_style": "form",
        "scope_separator": ",",
        "default_scopes_json": ["chat:write"],
        "required_hosts_json": ["slack.com"],
        "aliases_json": ["slack.com"],
        "docs_url": "https://api.slack.com/authentication/oauth-v2",
    },
    {
        "slug": "linear",
        "label": "Linear",
        "authorize_url": "https://linear.app/oauth/authorize",
        "token_url": "https://api.linear.app/oauth/token",
        "api_base_url": "https://api.linear.app",
        "flow": "confidential",
        "token_exchange_style": "form",
        "scope_separator": ",",
        "default_scopes_json": ["read"],
        "required_hosts_json": ["api.linear.app"],
        "aliases_json": ["linear.app"],
        "docs_url": "https://developers.linear.app/docs/oauth/authentication",
    },
    {
        "slug": "notion",
        "label": "Notion",
        "authorize_url": "https://api.notion.com/v1/oauth/authorize",
        "token_url": "https://api.notion.com/v1/oauth/token",
        "api_base_url": "https://api.notion.com",
        "flow": "confidential",
        "token_exchange_style": "basic-json",
        "extra_authorize_params_json": {"owner": "user"},
        "required_hosts_json": ["api.notion.com"],
        "aliases_json": ["notion.so"],
        "docs_url": "https://developers.notion.com/docs/authorization",
    },
    {
        "slug": "spotify",
        "label": "Spotify",
        "authorize_url": "https://accounts.spotify.com/authorize",
        "token_url": "https://accounts.spotify.com/api/token",
        "api_base_url": "https://api.spotify.com",
        "flow": "pkce",
        "default_scopes_json": ["user-read-email"],
        "required_hosts_json": ["api.spotify.com"],
        "aliases_json": ["accounts.spotify.com"],
        "docs_url": "https://developer.spotify.com/documentation/web-api/tutorials/code-pkce-flow",
    },
    {
        "slug": "gitlab",
        "label": "GitLab",
        "authorize_url": "https://gitlab.com/oauth/authorize",
        "token_url": "https://gitlab.com/oauth/token",
        "api_base_url": "https://gitlab.com/api/v4",
        "flow": "pkce",
        "default_scopes_json": ["read_api"],
        "required_hosts_json": ["gitlab.com"],
        "aliases_json": ["gitlab.com"],
        "docs_url": "https://docs.gitlab.com/ee/api/oauth2.html",
    },
    {
        "slug": "dropbox",
        "label": "Dropbox",
        "authorize_url": "https://www.dropbox.com/oauth2/authorize",
        "token_url": "https://api.dropboxapi.com/oauth2/token",
        "api_base_url": "https://api.dropboxapi.com",
        "flow": "pkce",
        "extra_authorize_params_json": {"token_access_type": "offline"},
        "required_hosts_json": ["api.dropboxapi.com", "content.dropboxapi.com"],
        "aliases_json": ["dropbox.com", "www.dropbox.com"],
        "docs_url": "https://developers.dropbox.com/oauth-guide",
    },
]


def seed(apps: Any, schema_editor: Any) -> None:
    provider = apps.get_model("packages", "IntegrationProvider")
    for row in PROVIDERS:
        fields = {k: v for k, v in row.items() if k != "slug"}
        provider.objects.get_or_create(slug=row["slug"], defaults=fields)


class Migration(migrations.Migration):
    dependencies = [("packages", "0006_integration_tokens_as_secrets")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
