"""Who may use a connection's tokens: ``usageMode`` and ``allowedPackages`` set through
integrationSave and on the integration's page, and the token secrets' package grants that
follow them — checked by running saved packages whose fetch carries the access token."""

from __future__ import annotations

import json
import secrets as pysecrets

import pytest
from django.test import Client
from rest_framework.test import APIClient

from apps.packages.models import SecretEntry, UserIntegration
from tests.accounts.factories import UserFactory
from tests.fakes.oauth_provider import OAuthProviderFake
from tests.packages.conftest import Agent
from tests.packages.oauth_flow import authorize, byo_app, callback, connect

pytestmark = [
    pytest.mark.django_db(databases=["default", "audit"]),
    pytest.mark.usefixtures("fresh_keyring", "fs_buckets"),
]
API_HOST = "api.fake.test"


@pytest.fixture
def provider(provider, settings):
    # Saved packages' fetches reach the provider's API host in these tests.
    settings.KODY_EXECUTE_FETCH_ALLOW = {API_HOST}
    return provider


@pytest.fixture
def ada(provider):
    user = UserFactory(username=f"ada-{pysecrets.token_hex(3)}")
    client = Client()
    client.force_login(user)
    return user, Agent(user), client


def caller_module(provider: OAuthProviderFake) -> str:
    port = provider.base_url.rsplit(":", 1)[1]
    url = json.dumps(f"http://{API_HOST}:{port}/api/me")
    header = json.dumps({"Authorization": "Bearer {{secret:integration.hub.access_token}}"})
    return (
        "export default async function () {\n"
        f"  try {{ const r = await fetch({url}, {{ headers: {header} }});\n"
        "    return { status: r.status }; }\n"
        "  catch (e) { return { refused: String(e) }; }\n"
        "}\n"
    )


def publish(agent: Agent, user, name: str, provider: OAuthProviderFake) -> dict:
    files = {
        "package.json": json.dumps(
            {
                "name": f"@{user.username}/{name}",
                "exports": {".": "./mod.ts"},
                "kody": {"description": f"The {name} package.", "tags": ["examples"]},
            }
        ),
        "README.md": f"# {name}\n",
        "mod.ts": caller_module(provider),
    }
    return agent.call("packageSave", files=files)["package"]


def run(agent: Agent, package: dict) -> dict:
    raw = agent.call("packageInvocationTokenCreate", packageId=package["id"], name="t")["secret"]
    reply = APIClient().post(
        f"/api/v1/packages/{package['id']}/exports/default",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert reply.status_code == 200, reply.content
    return reply.json()["result"]


def grants(user) -> dict[str, list[str]]:
    rows = SecretEntry.objects.filter(
        bucket__user_id=user.stable_user_id, name__startswith="integration.hub."
    )
    return {row.name: list(row.allowed_packages) for row in rows}


def test_allowed_packages_mode_reserves_the_token_to_the_named_package(provider, ada):
    user, agent, client = ada
    granted = publish(agent, user, "granted", provider)
    other = publish(agent, user, "other", provider)
    integration = connect(
        agent,
        client,
        name="hub",
        app=byo_app(provider),
        requiredHosts=[API_HOST],
        usageMode="allowed-packages",
        allowedPackages=[granted["id"]],
    )
    assert integration["usageMode"] == "allowed-packages"
    assert integration["allowedPackages"] == [granted["id"]]
    assert integration["grantedPackages"] == [granted["id"]]
    assert grants(user) and all(v == [granted["id"]] for v in grants(user).values())

    assert run(agent, granted) == {"status": 200}
    refused = run(agent, other)
    assert "refused" in refused and "integration.hub.access_token" in refused["refused"]
    assert len(provider.api_calls) == 1  # the refused package sent nothing
    # Ad hoc code is not one of the named packages either.
    code = (
        f'async () => (await fetch("http://{API_HOST}:{provider.base_url.rsplit(":", 1)[1]}'
        '/api/me", {headers: {Authorization: "Bearer {{secret:integration.hub.access_token}}"}}'
        ")).status"
    )
    assert agent.error("execute", 422, code=code)["code"] == "fetch_refused"
    assert len(provider.api_calls) == 1


def test_own_packages_mode_lets_your_packages_use_the_token(provider, ada):
    user, agent, client = ada
    mine = publish(agent, user, "mine", provider)
    connect(agent, client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    assert UserIntegration.objects.get(user_id=user.stable_user_id).usage_mode in (
        "",
        "own-packages",
    )
    assert run(agent, mine) == {"status": 200}


def test_integration_save_only_narrows_grants_until_the_person_authorizes(provider, ada):
    user, agent, client = ada
    first = publish(agent, user, "first", provider)
    second = publish(agent, user, "second", provider)
    save = {"name": "hub", "app": byo_app(provider), "requiredHosts": [API_HOST]}
    connect(agent, client, **save, usageMode="allowed-packages", allowedPackages=[first["id"]])
    # An agent asks for the second package instead: the first loses the token at once, the
    # second gets it only when the person authorizes at the provider.
    started = agent.call("integrationSave", **save, allowedPackages=[second["id"]])
    assert started["integration"]["grantedPackages"] == []
    assert "refused" in run(agent, first) and "refused" in run(agent, second)
    assert callback(client, authorize(started["authorizeUrl"])).status_code == 302
    assert run(agent, second) == {"status": 200}
    assert "refused" in run(agent, first)


def test_the_page_sets_usage_and_the_grants_follow_at_once(provider, ada):
    user, agent, client = ada
    pkg = publish(agent, user, "paged", provider)
    connect(agent, client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    page = client.get("/account/integrations/hub")
    assert page.status_code == 200 and pkg["id"].encode() in page.content
    response = client.post(
        "/account/integrations/hub", {"action": "usage", "usageMode": "allowed-packages"}
    )
    assert response.status_code == 302
    assert "refused" in run(agent, pkg)
    response = client.post(
        "/account/integrations/hub",
        {"action": "usage", "usageMode": "allowed-packages", "allowedPackages": [pkg["id"]]},
    )
    assert response.status_code == 302
    assert all(v == [pkg["id"]] for v in grants(user).values()) and grants(user)
    assert run(agent, pkg) == {"status": 200}
    shown = agent.call("integrationGet", name="hub")["integration"]
    assert shown["usageMode"] == "allowed-packages" and shown["grantedPackages"] == [pkg["id"]]


def test_bad_usage_input_is_refused_and_nothing_written(provider, ada):
    user, agent, client = ada
    connect(agent, client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    save = {"name": "hub", "app": byo_app(provider), "requiredHosts": [API_HOST]}
    error = agent.error("integrationSave", 422, **save, usageMode="anyone")
    assert error["code"] == "invalid_input"
    bad = client.post("/account/integrations/hub", {"action": "usage", "usageMode": "anyone"})
    assert bad.status_code == 422 and b"usageMode" in bad.content
    row = UserIntegration.objects.get(user_id=user.stable_user_id)
    assert row.usage_mode in ("", "own-packages") and row.allowed_packages_json == []


def test_an_outsider_cannot_set_usage_nor_grant_their_package(provider, ada):
    user, agent, client = ada
    connect(agent, client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    ben = UserFactory(username=f"ben-{pysecrets.token_hex(3)}")
    ben_agent, ben_client = Agent(ben), Client()
    ben_client.force_login(ben)
    theirs = publish(ben_agent, ben, "theirs", provider)
    refused = ben_client.post(
        "/account/integrations/hub",
        {"action": "usage", "usageMode": "own-packages", "allowedPackages": [theirs["id"]]},
    )
    assert refused.status_code == 404
    # Nor can the owner name someone else's package.
    bad = client.post(
        "/account/integrations/hub",
        {"action": "usage", "usageMode": "own-packages", "allowedPackages": [theirs["id"]]},
    )
    assert bad.status_code == 404
    assert all(v == [] for v in grants(user).values())
