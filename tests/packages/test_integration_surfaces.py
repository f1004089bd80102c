"""Integration capabilities and pages, person by person: every one is scoped to the caller
(an outsider sees and changes nothing of the owner's), platform apps are the operator's
(and only enabled ones are offered), and the provider registry answers searches and
discovery — RFC 8414 metadata fetched only from public (here: the test's loopback) hosts."""

from __future__ import annotations

import base64
import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from PIL import Image

from apps.accounts.importing import rule_for
from apps.accounts.models import PlatformOAuthApp
from apps.packages.models import IntegrationProvider, UserIntegration, UserOauthApp
from kody.capabilities import all_capabilities
from tests.fakes.oauth_provider import OAuthProviderFake
from tests.packages.conftest import Agent
from tests.packages.oauth_flow import APP_SECRET, byo_app, connect

pytestmark = [
    pytest.mark.django_db(databases=["default", "audit"]),
    pytest.mark.usefixtures("fresh_keyring", "fs_buckets"),
]


@pytest.fixture
def as_operator(operator) -> Agent:
    return Agent(operator)


@pytest.fixture
def connected(as_owner, owner_client, provider) -> dict:
    return connect(
        as_owner, owner_client, name="hub", app=byo_app(provider), requiredHosts=["api.fake.test"]
    )


def platform_fields(provider: OAuthProviderFake, **extra) -> dict:
    return {
        "slug": "fakehub",
        "provider": "fake",
        "label": "Fake Hub",
        "clientId": "fake-client",
        "clientSecret": APP_SECRET,
        "authorizeUrl": provider.url("/authorize"),
        "tokenUrl": provider.url("/token"),
        "flow": "confidential",
        "requiredHosts": ["api.fake.test"],
        **extra,
    }


# --- isolation: every user capability ---------------------------------------------------

USER_CAPABILITIES = {
    "integrationSave",
    "integrationGet",
    "integrationList",
    "integrationDelete",
    "integrationTokenRefresh",
    "integrationDiscover",
    "integrationRegistrySearch",
    "integrationOauthAppList",
    "integrationOauthAppRotateCredentials",
    "integrationPlatformAppList",
}


def test_every_integration_capability_has_an_isolation_test_here():
    module = "apps.packages.capabilities.integrations"
    declared = {c.name for c in all_capabilities() if c.handler.__module__ == module}
    assert declared == USER_CAPABILITIES
    assert all(c.domain == "integrations" for c in all_capabilities() if c.name in declared)


def test_the_owner_reads_their_integration(as_owner, connected):
    assert as_owner.call("integrationGet", name="hub")["integration"]["status"] == "connected"
    assert [i["name"] for i in as_owner.call("integrationList")["integrations"]] == ["hub"]


def test_an_outsider_cannot_read_the_owners_integration(as_outsider, connected):
    error = as_outsider.error("integrationGet", 404, name="hub")
    assert error["code"] == "integration_not_found"
    assert as_outsider.call("integrationList")["integrations"] == []


def test_an_outsider_cannot_delete_or_refresh_the_owners_integration(
    as_outsider, owner, connected, provider
):
    assert (
        as_outsider.error("integrationDelete", 404, name="hub")["code"] == "integration_not_found"
    )
    assert (
        as_outsider.error("integrationTokenRefresh", 404, name="hub")["code"]
        == "integration_not_found"
    )
    assert UserIntegration.objects.filter(user_id=owner.stable_user_id, name="hub").exists()
    assert provider.refresh_uses == {}


def test_an_outsider_sees_none_of_the_owners_apps(as_outsider, as_owner, connected):
    assert [a["slug"] for a in as_owner.call("integrationOauthAppList")["apps"]] == ["fake"]
    assert as_outsider.call("integrationOauthAppList")["apps"] == []


def test_an_outsider_cannot_rotate_or_use_the_owners_app(as_outsider, owner, connected):
    error = as_outsider.error(
        "integrationOauthAppRotateCredentials", 404, appSlug="fake", clientSecret="mine-now"
    )
    assert error["code"] == "oauth_app_not_found"
    error = as_outsider.error(
        "integrationSave", 404, name="stolen", appSlug="fake", requiredHosts=["x.test"]
    )
    assert error["code"] == "oauth_app_not_found"
    assert UserOauthApp.objects.get(user_id=owner.stable_user_id).client_id == "fake-client"


def test_the_owner_rotates_their_app(as_owner, connected):
    reply = as_owner.call("integrationOauthAppRotateCredentials", appSlug="fake", clientId="new-id")
    assert reply["app"]["clientId"] == "new-id" and reply["app"]["hasClientSecret"] is True


def test_an_outsider_may_reuse_a_name_without_touching_the_owners(
    as_outsider, owner, outsider, connected, provider
):
    as_outsider.call("integrationSave", name="hub", app=byo_app(provider), requiredHosts=["b.test"])
    mine = UserIntegration.objects.get(user_id=owner.stable_user_id, name="hub")
    theirs = UserIntegration.objects.get(user_id=outsider.stable_user_id, name="hub")
    assert mine.required_hosts_json == ["api.fake.test"] and mine.access_token_secret_name
    assert theirs.required_hosts_json == ["b.test"] and not theirs.access_token_secret_name


def test_registry_and_platform_lists_hold_no_personal_data(as_owner, as_outsider, connected):
    for agent in (as_owner, as_outsider):
        assert "hub" not in str(agent.call("integrationRegistrySearch", query="fake"))
        assert agent.call("integrationPlatformAppList")["apps"] == []
        assert agent.call("integrationDiscover", provider="fake")["found"] is False


# --- pages --------------------------------------------------------------------------------


def test_the_owners_pages_show_the_integration_and_app(owner_client, connected):
    listing = owner_client.get("/account/integrations")
    assert listing.status_code == 200 and b"integration.hub.access_token" in listing.content
    assert owner_client.get("/account/integrations/hub").status_code == 200
    assert owner_client.get("/account/integrations/apps/fake").status_code == 200


def test_an_outsiders_pages_show_nothing_of_the_owners(outsider_client, owner, connected):
    listing = outsider_client.get("/account/integrations")
    assert listing.status_code == 200 and b"integration.hub" not in listing.content
    assert (
        b"/account/integrations/hub" not in listing.content
        and b"fake-client" not in listing.content
    )
    assert outsider_client.get("/account/integrations/hub").status_code == 404
    assert outsider_client.get("/account/integrations/apps/fake").status_code == 404
    refused = outsider_client.post("/account/integrations/hub", {"action": "delete"})
    assert refused.status_code == 404
    assert UserIntegration.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_owner_deletes_on_the_page(owner_client, owner, connected):
    response = owner_client.post("/account/integrations/hub", {"action": "delete"})
    assert response.status_code == 302
    assert not UserIntegration.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_page_creates_an_app_and_connects_through_it(owner_client, owner, provider):
    created = owner_client.post(
        "/account/integrations",
        {
            "action": "app",
            "slug": "paged",
            "clientId": "fake-client",
            "clientSecret": APP_SECRET,
            "authorizeUrl": provider.url("/authorize"),
            "tokenUrl": provider.url("/token"),
            "flow": "confidential",
            "tokenExchangeStyle": "form",
        },
    )
    assert created.status_code == 302 and created["Location"].endswith("/apps/paged")
    started = owner_client.post(
        "/account/integrations",
        {"action": "connect", "name": "viapage", "app": "user:paged", "requiredHosts": "a.test"},
    )
    assert started.status_code == 302 and started["Location"].startswith(provider.url("/authorize"))
    assert UserIntegration.objects.get(user_id=owner.stable_user_id, name="viapage").app_slug == (
        "paged"
    )


def _no_secret_values(body: bytes, provider: OAuthProviderFake) -> None:
    values = [*provider.access_tokens, *provider.refresh_tokens, APP_SECRET]
    assert values and not [v for v in values if v.encode() in body]


def test_the_owners_json_twins_match_the_pages(owner_client, connected, provider):
    listing = owner_client.get("/account/integrations.json")
    assert listing.status_code == 200 and listing["Content-Type"] == "application/json"
    body = listing.json()
    assert [i["name"] for i in body["integrations"]] == ["hub"]
    assert body["integrations"][0]["accessTokenSecret"] == "integration.hub.access_token"
    assert [a["slug"] for a in body["apps"]] == ["fake"]
    assert body["apps"][0]["hasClientSecret"] is True
    assert "platformApps" in body and "providers" in body
    one = owner_client.get("/account/integrations/hub.json")
    assert one.status_code == 200 and one.json()["integration"]["status"] == "connected"
    app = owner_client.get("/account/integrations/apps/fake.json")
    assert app.status_code == 200 and app.json()["usedBy"] == ["hub"]
    for response in (listing, one, app):
        _no_secret_values(response.content, provider)


def test_an_outsiders_json_twins_show_nothing_of_the_owners(outsider_client, connected, provider):
    listing = outsider_client.get("/account/integrations.json")
    assert listing.status_code == 200
    assert listing.json()["integrations"] == [] and listing.json()["apps"] == []
    one = outsider_client.get("/account/integrations/hub.json")
    assert one.status_code == 404 and one.json()["error"]["code"] == "integration_not_found"
    app = outsider_client.get("/account/integrations/apps/fake.json")
    assert app.status_code == 404 and app.json()["error"]["code"] == "oauth_app_not_found"
    for response in (listing, one, app):
        _no_secret_values(response.content, provider)


def test_the_json_post_twin_changes_the_owners_integration_only(
    owner_client, outsider_client, owner, connected, provider
):
    path = "/account/integrations/hub.json"
    refused = outsider_client.post(path, {"action": "usage", "usageMode": "allowed-packages"})
    assert refused.status_code == 404
    assert outsider_client.post(path, {"action": "delete"}).status_code == 404
    row = UserIntegration.objects.get(user_id=owner.stable_user_id, name="hub")
    assert row.usage_mode in ("", "own-packages")
    changed = owner_client.post(path, {"action": "usage", "usageMode": "allowed-packages"})
    assert changed.status_code == 200
    assert changed.json()["integration"]["usageMode"] == "allowed-packages"
    again = owner_client.post(path, {"action": "reconnect"})
    assert again.json()["authorizeUrl"].startswith(provider.url("/authorize"))
    assert owner_client.post(path, {"action": "what"}).status_code == 422
    _no_secret_values(changed.content + again.content, provider)
    assert owner_client.post(path, {"action": "delete"}).json() == {"deleted": True, "name": "hub"}
    assert not UserIntegration.objects.filter(user_id=owner.stable_user_id).exists()


def test_the_json_twins_need_a_signed_in_person(client):
    for path in (
        "/account/integrations.json",
        "/account/integrations/hub.json",
        "/account/integrations/apps/fake.json",
    ):
        assert client.get(path).status_code == 302


def test_the_openapi_json_is_never_an_integration(owner_client):
    from django.urls import resolve

    from apps.packages import openapi_views

    assert resolve("/account/integrations/openapi.json").func is openapi_views.binding_list_json


def test_the_openapi_path_is_never_an_integration_name(owner_client):
    # /account/integrations/openapi… belongs to the OpenAPI bindings pages.
    from django.urls import resolve

    from apps.packages import openapi_views

    assert resolve("/account/integrations/openapi").func is openapi_views.binding_list
    page = owner_client.get("/account/integrations/openapi")
    assert page.status_code == 200
    assert page.resolver_match.func is openapi_views.binding_list


def test_pages_need_a_signed_in_person(client):
    assert client.get("/account/integrations").status_code == 302
    assert client.get("/account/integrations/callback?state=x&code=y").status_code == 302


# --- platform apps (operator) ------------------------------------------------------------


def png() -> str:
    out = io.BytesIO()
    Image.new("RGB", (600, 300), "#336699").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def test_the_operator_saves_lists_and_deletes_a_platform_app(as_operator, client, provider):
    saved = as_operator.call("adminPlatformOauthAppSave", **platform_fields(provider, logo=png()))
    app = saved["app"]
    assert app["hasClientSecret"] is True and APP_SECRET not in str(saved)
    assert app["logoUrl"] == "/integrations/logos/fakehub"
    logo = client.get(app["logoUrl"])
    assert logo.status_code == 200 and logo["Content-Type"] == "image/webp"
    with Image.open(io.BytesIO(logo.content)) as image:
        assert max(image.size) == 256
    assert PlatformOAuthApp.objects.get(slug="fakehub").client_secret_encrypted
    assert APP_SECRET not in PlatformOAuthApp.objects.get(slug="fakehub").client_secret_encrypted
    listed = as_operator.call("adminPlatformOauthAppList")["apps"]
    assert [a["slug"] for a in listed] == ["fakehub"]
    assert as_operator.call("adminPlatformOauthAppDelete", slug="fakehub")["deleted"] is True
    assert client.get(app["logoUrl"]).status_code == 404


def test_only_enabled_platform_apps_are_offered(as_operator, as_owner, provider):
    as_operator.call("adminPlatformOauthAppSave", **platform_fields(provider))
    assert [a["slug"] for a in as_owner.call("integrationPlatformAppList")["apps"]] == ["fakehub"]
    as_operator.call("adminPlatformOauthAppSave", slug="fakehub", enabled=False)
    assert as_owner.call("integrationPlatformAppList")["apps"] == []
    error = as_owner.error("integrationSave", 404, name="hub", platformAppSlug="fakehub")
    assert error["code"] == "platform_app_not_found"
    # The operator still sees it.
    assert as_operator.call("adminPlatformOauthAppList")["apps"][0]["enabled"] is False


def test_a_platform_app_in_use_cannot_be_deleted(as_operator, as_owner, owner_client, provider):
    as_operator.call("adminPlatformOauthAppSave", **platform_fields(provider))
    connect(as_owner, owner_client, name="hub", platformAppSlug="fakehub")
    error = as_operator.error("adminPlatformOauthAppDelete", 409, slug="fakehub")
    assert error["code"] == "platform_app_in_use"


@pytest.mark.parametrize(
    "name",
    ["adminPlatformOauthAppList", "adminPlatformOauthAppSave", "adminPlatformOauthAppDelete"],
)
def test_people_who_are_not_operators_cannot_call_platform_admin(as_owner, name):
    response = as_owner.raw(name, slug="fakehub")
    assert response.status_code in (403, 404)
    assert not PlatformOAuthApp.objects.exists()


# --- registry and discovery ---------------------------------------------------------------


def test_the_registry_ships_known_providers_and_searches_them(as_owner):
    found = as_owner.call("integrationRegistrySearch", query="git")["providers"]
    assert [p["slug"] for p in found] == ["github", "gitlab"]
    github = found[0]
    assert github["app"]["tokenUrl"] == "https://github.com/login/oauth/access_token"
    assert github["requiredHosts"] == ["api.github.com"]


def test_operators_edit_the_registry(as_owner):
    IntegrationProvider.objects.filter(slug="gitlab").update(enabled=False)
    found = as_owner.call("integrationRegistrySearch", query="git")["providers"]
    assert [p["slug"] for p in found] == ["github"]


def test_discover_knows_a_provider_by_alias_or_host(as_owner):
    assert as_owner.call("integrationDiscover", provider="github.com")["provider"]["slug"] == (
        "github"
    )
    reply = as_owner.call("integrationDiscover", provider="api.linear.app")
    assert reply["found"] is True and reply["app"]["scopeSeparator"] == ","
    assert as_owner.call("integrationDiscover", provider="nowhere.example")["found"] is False


def test_discover_reads_rfc8414_metadata_from_a_url(as_owner, provider):
    reply = as_owner.call("integrationDiscover", url=provider.url("/"))
    assert reply["metadata"]["tokenUrl"] == provider.url("/token")
    assert reply["metadata"]["registrationUrl"] == provider.url("/register")
    assert reply["app"]["flow"] == "pkce" and reply["app"]["authorizeUrl"] == provider.url(
        "/authorize"
    )


@pytest.mark.parametrize(
    "url", ["https://10.0.0.1/", "https://169.254.169.254/", "file:///etc/passwd"]
)
def test_discover_refuses_internal_addresses(as_owner, url):
    error = as_owner.error("integrationDiscover", 422, url=url)
    assert error["code"] == "invalid_input"


# --- Django admin ---------------------------------------------------------------------------


def upload(name: str) -> SimpleUploadedFile:
    return SimpleUploadedFile(name, base64.b64decode(png()), content_type="image/png")


def test_the_admin_form_seals_the_client_secret_and_fits_the_logo(operator_client, client):
    response = operator_client.post(
        "/admin/accounts/platformoauthapp/add/",
        {
            "slug": "adminhub",
            "provider": "fake",
            "client_id": "cid",
            "client_secret": "admin-typed-secret",
            "authorize_url": "https://provider.example/authorize",
            "token_url": "https://provider.example/token",
            "flow": "confidential",
            "enabled": "on",
            "extra_authorize_params_json": "{}",
            "allowed_scopes_json": "[]",
            "default_scopes_json": "[]",
            "required_hosts_json": '["api.provider.example"]',
            "logo_upload": upload("logo.png"),
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    app = PlatformOAuthApp.objects.get(slug="adminhub")
    assert app.client_secret_encrypted and "admin-typed-secret" not in app.client_secret_encrypted
    assert app.logo_key.startswith("platform-oauth-app-logos/adminhub/")
    assert client.get("/integrations/logos/adminhub")["Content-Type"] == "image/webp"
    page = operator_client.get(f"/admin/accounts/platformoauthapp/{app.slug}/change/")
    assert page.status_code == 200 and app.client_secret_encrypted not in page.content.decode()


def test_the_admin_uploads_a_provider_mark_the_registry_shows(operator_client, client, as_owner):
    response = operator_client.post(
        "/admin/accounts/platformprovidermark/add/",
        {"slug": "github", "label": "GitHub", "aliases_json": "[]", "logo_upload": upload("m.png")},
    )
    assert response.status_code == 302
    found = as_owner.call("integrationRegistrySearch", query="github")["providers"]
    assert found[0]["logoUrl"] == "/integrations/marks/github"
    assert client.get("/integrations/marks/github").status_code == 200


def test_imported_connections_arrive_without_secret_names():
    integration = rule_for("user_integrations")
    app = rule_for("user_oauth_apps")
    assert integration is not None and app is not None
    row = integration(
        {"name": "hub", "access_token_secret_name": "STRIPE_KEY", "connected_at": "2030-01-01"},
        None,
    )
    assert row["access_token_secret_name"] == "" and row["connected_at"] is None
    assert (
        app({"slug": "x", "client_secret_secret_name": "OTHER"}, None)["client_secret_secret_name"]
        == ""
    )
