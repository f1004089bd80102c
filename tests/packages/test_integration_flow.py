"""OAuth client connections against a local provider speaking the real protocol: the
authorization-code flow for bring-your-own and platform apps, PKCE or confidential, the
app's scope separator, token exchange style and extra parameters, a state bound to the
signed-in person and usable once, and tokens stored as host-gated secrets."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine

from apps.packages.models import SecretEntry, UserIntegration
from apps.packages.services import secrets
from apps.packages.services.integrations import live_access_token, read_access_token
from tests.packages.conftest import Agent
from tests.packages.oauth_flow import APP_SECRET, authorize, byo_app, callback, connect, query

pytestmark = [
    pytest.mark.django_db(databases=["default", "audit"]),
    pytest.mark.usefixtures("fresh_keyring"),
]


@pytest.fixture
def provider(provider):
    provider.add_client("public-client", None)  # a client without a secret (PKCE only)
    return provider


@pytest.fixture
def as_operator(operator) -> Agent:
    return Agent(operator)


def later(seconds: int) -> datetime:
    return datetime.now(UTC) + timedelta(seconds=seconds)


def stored(user, name: str) -> SecretEntry:
    return SecretEntry.objects.get(bucket__user_id=user.stable_user_id, name=name)


def test_a_confidential_byo_app_connects_and_its_tokens_become_host_gated_secrets(
    as_owner, owner, owner_client, provider
):
    integration = connect(
        as_owner,
        owner_client,
        name="fake",
        app=byo_app(provider, tokenExchangeStyle="basic-form"),
        scopes=["read", "write"],
        requiredHosts=["api.fake.test"],
    )
    assert integration["status"] == "connected"
    assert integration["placeholder"] == "{{secret:integration.fake.access_token}}"
    assert provider.token_requests == [{"grant_type": "authorization_code", "auth": "basic"}]
    access = stored(owner, "integration.fake.access_token")
    refresh = stored(owner, "integration.fake.refresh_token")
    assert access.allowed_hosts == ["api.fake.test"] == refresh.allowed_hosts
    assert access.expires_at is not None  # the provider said expires_in
    token = read_access_token(owner.stable_user_id, "fake")
    assert token is not None and provider.is_valid_access_token(token)
    assert token not in access.encrypted_value  # sealed, not stored in the clear
    row = UserIntegration.objects.get(user_id=owner.stable_user_id, name="fake")
    assert row.connected_at is not None and row.token_refreshed_at is None
    owner.refresh_from_db()
    assert owner.first_integration_at is not None


def test_the_client_secret_is_a_secret_without_hosts_and_never_comes_back(
    as_owner, owner, provider
):
    as_owner.call("integrationSave", name="fake", app=byo_app(provider))
    apps = as_owner.call("integrationOauthAppList")["apps"]
    assert [a["slug"] for a in apps] == ["fake"] and apps[0]["hasClientSecret"] is True
    assert APP_SECRET not in json.dumps(apps)
    entry = stored(owner, "oauth-app.fake.client_secret")
    assert entry.allowed_hosts == []
    with pytest.raises(secrets.SecretNotGranted):
        secrets.resolve_for_use(owner.stable_user_id, entry.name, package_id=None, host="127.0.0.1")


def test_a_pkce_public_app_sends_a_s256_challenge_and_the_verifier(
    as_owner, owner_client, provider
):
    app = byo_app(provider, clientId="public-client", clientSecret=None, flow="pkce")
    started = as_owner.call("integrationSave", name="pub", app=app, requiredHosts=["a.test"])
    asked = query(started["authorizeUrl"])
    assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
    response = callback(owner_client, authorize(started["authorizeUrl"]))
    assert response.status_code == 302
    # The fake checks the verifier against the challenge; a public client sends no secret.
    assert provider.token_requests == [{"grant_type": "authorization_code", "auth": "none"}]
    assert as_owner.call("integrationGet", name="pub")["integration"]["status"] == "connected"


def test_the_authorize_url_uses_the_apps_separator_and_extra_params(as_owner, provider):
    app = byo_app(provider, scopeSeparator=",", extraAuthorizeParams={"prompt": "consent"})
    started = as_owner.call(
        "integrationSave", name="fake", app=app, scopes=["a", "b"], requiredHosts=["x.test"]
    )
    asked = query(started["authorizeUrl"])
    assert asked["scope"] == "a,b" and asked["prompt"] == "consent"
    assert asked["client_id"] == "fake-client" and asked["response_type"] == "code"
    assert "code_challenge" not in asked  # confidential without usePkce
    assert started["integration"]["status"] == "pending"


def test_extra_params_may_not_replace_what_the_flow_sets(as_owner, provider):
    app = byo_app(provider, extraAuthorizeParams={"redirect_uri": "https://evil.test/cb"})
    error = as_owner.error("integrationSave", 422, name="fake", app=app)
    assert error["details"]["field"] == "extraAuthorizeParams"
    assert not UserIntegration.objects.exists()


def test_basic_json_exchange_posts_json_with_http_basic(as_owner, owner_client, provider):
    connect(
        as_owner,
        owner_client,
        name="fake",
        app=byo_app(provider, tokenExchangeStyle="basic-json"),
        requiredHosts=["x.test"],
    )
    assert provider.token_requests == [{"grant_type": "authorization_code", "auth": "basic"}]


def test_a_platform_app_connects_and_refreshes_once_with_rotation(
    as_owner, as_operator, owner, owner_client, provider
):
    as_operator.call(
        "adminPlatformOauthAppSave",
        slug="fakehub",
        provider="fake",
        label="Fake Hub",
        clientId="fake-client",
        clientSecret=APP_SECRET,
        authorizeUrl=provider.url("/authorize"),
        tokenUrl=provider.url("/token"),
        flow="confidential",
        tokenExchangeStyle="form",
        allowedScopes=["read", "write"],
        defaultScopes=["read"],
        requiredHosts=["api.fake.test"],
    )
    integration = connect(as_owner, owner_client, name="hub", platformAppSlug="fakehub")
    assert integration["platformAppSlug"] == "fakehub" and integration["scopes"] == ["read"]
    assert integration["requiredHosts"] == ["api.fake.test"]
    assert provider.token_requests[-1] == {"grant_type": "authorization_code", "auth": "post"}
    first_access = read_access_token(owner.stable_user_id, "hub")
    first_refresh = secrets.read_managed(owner.stable_user_id, "integration.hub.refresh_token")

    reply = as_owner.call("integrationTokenRefresh", name="hub")
    assert reply["refreshed"] is True and reply["integration"]["tokenRefreshedAt"]
    assert provider.refresh_uses == {first_refresh: 1}
    second_access = read_access_token(owner.stable_user_id, "hub")
    assert second_access != first_access and provider.is_valid_access_token(second_access)
    second_refresh = secrets.read_managed(owner.stable_user_id, "integration.hub.refresh_token")
    assert second_refresh != first_refresh  # the rotated one replaced it

    with time_machine.travel(later(60), tick=True):  # past the freshness window
        assert as_owner.call("integrationTokenRefresh", name="hub")["refreshed"] is True
    assert provider.refresh_uses == {first_refresh: 1, second_refresh: 1}


def test_scopes_outside_the_platform_apps_menu_are_refused(as_owner, as_operator, provider):
    as_operator.call(
        "adminPlatformOauthAppSave",
        slug="fakehub",
        provider="fake",
        clientId="fake-client",
        clientSecret=APP_SECRET,
        authorizeUrl=provider.url("/authorize"),
        tokenUrl=provider.url("/token"),
        flow="confidential",
        allowedScopes=["read"],
        requiredHosts=["api.fake.test"],
    )
    error = as_owner.error(
        "integrationSave", 422, name="hub", platformAppSlug="fakehub", scopes=["admin"]
    )
    assert error["details"]["scopes"] == ["admin"]


def test_a_state_works_once(as_owner, owner_client, provider):
    started = as_owner.call(
        "integrationSave", name="fake", app=byo_app(provider), requiredHosts=["x.test"]
    )
    back = authorize(started["authorizeUrl"])
    assert callback(owner_client, back).status_code == 302
    again = callback(owner_client, back)
    assert again.status_code == 403 and b"oauth_state_invalid" in again.content
    assert len(provider.token_requests) == 1


def test_a_state_belongs_to_the_person_who_started_it(
    as_owner, owner_client, outsider_client, provider
):
    started = as_owner.call(
        "integrationSave", name="fake", app=byo_app(provider), requiredHosts=["x.test"]
    )
    back = authorize(started["authorizeUrl"])
    refused = callback(outsider_client, back)
    assert refused.status_code == 403 and provider.token_requests == []
    # The outsider's attempt did not burn it: the owner still completes the flow.
    assert callback(owner_client, back).status_code == 302
    assert as_owner.call("integrationGet", name="fake")["integration"]["status"] == "connected"


def test_a_forged_or_expired_state_is_refused(as_owner, owner_client, provider):
    started = as_owner.call(
        "integrationSave", name="fake", app=byo_app(provider), requiredHosts=["x.test"]
    )
    back = authorize(started["authorizeUrl"])
    forged = back.replace("state=", "state=x")
    assert callback(owner_client, forged).status_code == 403
    with time_machine.travel(later(11 * 60), tick=True):
        assert callback(owner_client, back).status_code == 403
    assert provider.token_requests == []


def test_a_denied_authorization_leaves_the_integration_pending(as_owner, owner_client, provider):
    provider.deny = True
    started = as_owner.call(
        "integrationSave", name="fake", app=byo_app(provider), requiredHosts=["x.test"]
    )
    response = callback(owner_client, authorize(started["authorizeUrl"]))
    assert response.status_code == 502 and b"oauth_provider_error" in response.content
    assert as_owner.call("integrationGet", name="fake")["integration"]["status"] == "pending"


def test_a_token_url_on_a_private_address_is_never_called(as_owner, owner_client, provider):
    app = byo_app(provider, tokenUrl="https://10.0.0.7/token")
    started = as_owner.call("integrationSave", name="fake", app=app, requiredHosts=["x.test"])
    response = callback(owner_client, authorize(started["authorizeUrl"]))
    assert response.status_code == 502 and b"oauth_provider_error" in response.content
    assert not SecretEntry.objects.filter(name__startswith="integration.").exists()


def test_plain_http_endpoints_are_refused_at_save(as_owner, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    app = {
        "slug": "x",
        "clientId": "c",
        "clientSecret": "s",
        "authorizeUrl": "http://provider.example/authorize",
        "tokenUrl": "https://provider.example/token",
        "flow": "confidential",
    }
    error = as_owner.error("integrationSave", 422, name="x", app=app, requiredHosts=["x.test"])
    assert error["details"]["field"] == "authorizeUrl"


def test_deleting_an_integration_deletes_its_token_secrets(as_owner, owner, owner_client, provider):
    connect(as_owner, owner_client, name="fake", app=byo_app(provider), requiredHosts=["x.test"])
    assert as_owner.call("integrationDelete", name="fake") == {"deleted": True, "name": "fake"}
    assert not SecretEntry.objects.filter(name__startswith="integration.fake.").exists()
    assert as_owner.call("integrationList")["integrations"] == []
    # The app stays, with its client secret, until the person deletes it.
    assert stored(owner, "oauth-app.fake.client_secret")


def test_rotating_credentials_changes_what_the_next_token_request_sends(
    as_owner, owner_client, provider
):
    as_owner.call("integrationSave", name="fake", app=byo_app(provider), requiredHosts=["x.test"])
    provider.add_client("fake-client", "rotated-secret-value")
    reply = as_owner.call(
        "integrationOauthAppRotateCredentials", appSlug="fake", clientSecret="rotated-secret-value"
    )
    assert "rotated-secret-value" not in json.dumps(reply)
    integration = connect(
        as_owner, owner_client, name="fake", appSlug="fake", requiredHosts=["x.test"]
    )
    assert integration["status"] == "connected"  # the fake accepted only the new secret


def test_a_reserved_name_is_refused(as_owner, provider):
    for name in ("openapi", "apps", "callback"):
        error = as_owner.error("integrationSave", 422, name=name, app=byo_app(provider))
        assert error["details"]["field"] == "name"


def test_the_status_follows_the_token_secret(as_owner, owner_client, provider):
    connect(as_owner, owner_client, name="fake", app=byo_app(provider), requiredHosts=["x.test"])
    with time_machine.travel(later(2 * 3600), tick=True):  # past the fake's one-hour tokens
        assert as_owner.call("integrationGet", name="fake")["integration"]["status"] == "expired"
    as_owner.call("secretDelete", name="integration.fake.access_token")
    integration = as_owner.call("integrationGet", name="fake")["integration"]
    assert integration["status"] == "missing"


def test_kodys_own_use_of_an_expired_token_refreshes_it_first(
    as_owner, owner, owner_client, provider
):
    connect(as_owner, owner_client, name="fake", app=byo_app(provider), requiredHosts=["x.test"])
    first = read_access_token(owner.stable_user_id, "fake")
    assert live_access_token(owner.stable_user_id, "fake") == first  # still live: no refresh
    with time_machine.travel(later(2 * 3600), tick=True):
        assert read_access_token(owner.stable_user_id, "fake") is None
        token = live_access_token(owner.stable_user_id, "fake")
    assert token != first and provider.is_valid_access_token(token)
    assert sum(provider.refresh_uses.values()) == 1
    assert live_access_token(owner.stable_user_id, "nothing") is None
