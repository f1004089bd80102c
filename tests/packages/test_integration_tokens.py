"""What happens to a connection's tokens after the flow: eight concurrent refreshes spend the
refresh token once; a package's fetch carries the access token only to the integration's
required hosts; no token or client secret appears in any reply, page, log line or export;
account deletion removes the rows and their secrets.

These tests commit (the refresh race needs real concurrent transactions), so each person is a
fresh user rather than the shared cast.
"""

from __future__ import annotations

import io
import json
import logging
import secrets as pysecrets
import threading

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client

from apps.accounts.export import service as export
from apps.accounts.models import User
from apps.packages.models import SecretEntry, UserIntegration, UserOauthApp
from apps.packages.services.integrations import read_access_token
from tests.accounts.factories import UserFactory
from tests.fakes.oauth_provider import OAuthProviderFake
from tests.packages.conftest import Agent
from tests.packages.oauth_flow import APP_SECRET, byo_app, connect

pytestmark = [
    pytest.mark.django_db(transaction=True, databases=["default", "audit"]),
    pytest.mark.usefixtures("fresh_keyring", "fs_buckets"),
]
API_HOST = "api.fake.test"
OTHER_HOST = "elsewhere.test"
CALLERS = 8


def person(label: str) -> tuple[User, Agent, Client]:
    user = UserFactory(username=f"{label}-{pysecrets.token_hex(3)}")
    client = Client()
    client.force_login(user)
    return user, Agent(user), client


@pytest.fixture
def ada(provider) -> tuple[User, Agent, Client]:
    user, agent, client = person("ada")
    connect(agent, client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    return user, agent, client


def every_credential(provider: OAuthProviderFake) -> list[str]:
    with provider.lock:
        issued = [*provider.access_tokens, *provider.refresh_tokens, *provider.refresh_uses]
    return [APP_SECRET, *issued]


def test_eight_concurrent_refreshes_spend_the_refresh_token_once(provider, ada):
    user, _, _ = ada
    agents = [Agent(user) for _ in range(CALLERS)]
    original = UserIntegration.objects.get(user_id=user.stable_user_id, name="hub")
    start = threading.Barrier(CALLERS)
    replies: list[dict] = []
    failures: list[BaseException] = []

    def refresh(agent: Agent) -> None:
        try:
            start.wait()
            replies.append(agent.call("integrationTokenRefresh", name="hub"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=refresh, args=(a,)) for a in agents]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert failures == []
    assert len(replies) == CALLERS
    assert sum(r["refreshed"] for r in replies) == 1
    refreshes = [r for r in provider.token_requests if r["grant_type"] == "refresh_token"]
    assert len(refreshes) == 1 and list(provider.refresh_uses.values()) == [1]
    token = read_access_token(user.stable_user_id, "hub")
    assert token is not None and provider.is_valid_access_token(token)
    assert original.connected_at is not None


def test_a_package_fetch_carries_the_token_only_to_the_required_hosts(provider, ada, settings):
    user, agent, _ = ada
    settings.KODY_EXECUTE_FETCH_ALLOW = {API_HOST, OTHER_HOST}
    port = provider.base_url.rsplit(":", 1)[1]
    token = read_access_token(user.stable_user_id, "hub")
    header = {"Authorization": "Bearer {{secret:integration.hub.access_token}}"}

    def fetch(host: str) -> str:
        url = f"http://{host}:{port}/api/me"
        return (
            f"async () => {{ const r = await fetch({json.dumps(url)}, "
            f"{{headers: {json.dumps(header)}}}); return [r.status, await r.text()] }}"
        )

    reply = agent.call("execute", code=fetch(API_HOST))
    assert reply["result"][0] == 200
    assert provider.api_calls[-1]["authorization"] == f"Bearer {token}"
    assert token not in json.dumps(reply)  # scrubbed from what the code sees

    error = agent.error("execute", 422, code=fetch(OTHER_HOST))
    assert error["code"] == "fetch_refused" and error["details"]["host"] == OTHER_HOST
    assert len(provider.api_calls) == 1 and token not in json.dumps(error)


def test_another_persons_code_cannot_use_the_token(provider, ada, settings):
    _, _, _ = ada
    settings.KODY_EXECUTE_FETCH_ALLOW = {API_HOST}
    _, ben, _ = person("ben")
    port = provider.base_url.rsplit(":", 1)[1]
    code = (
        f'async () => (await fetch("http://{API_HOST}:{port}/api/me", {{headers: '
        '{Authorization: "Bearer {{secret:integration.hub.access_token}}"}})).status'
    )
    assert ben.error("execute", 422, code=code)["code"] == "fetch_refused"
    assert provider.api_calls == []


def test_no_token_or_client_secret_in_any_reply_page_log_or_export(provider, caplog):
    caplog.set_level(logging.DEBUG)
    user, agent, client = person("ada")
    replies = [
        agent.call("integrationSave", name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    ]
    connect(agent, client, name="hub", appSlug="fake", requiredHosts=[API_HOST])
    replies.append(agent.call("integrationTokenRefresh", name="hub"))
    for name, args in (
        ("integrationGet", {"name": "hub"}),
        ("integrationList", {}),
        ("integrationOauthAppList", {}),
        ("integrationPlatformAppList", {}),
        ("secretList", {}),
        ("integrationOauthAppRotateCredentials", {"appSlug": "fake", "clientId": "fake-client"}),
    ):
        replies.append(agent.call(name, **args))
    pages = [
        client.get(path).content.decode()
        for path in (
            "/account/integrations",
            "/account/integrations/hub",
            "/account/integrations/apps/fake",
            "/account/secrets",
        )
    ]
    manifest = export.manifest(user)
    sections = [
        export.section(user, "d1_table", table=table, cursor=None, limit=100)
        for table in ("user_integrations", "user_oauth_apps", "secret_entries", "secret_buckets")
    ]
    assert any(row["name"] == "hub" for row in sections[0]["rows"])  # the rows are exported
    everything = "\n".join(
        [
            json.dumps([replies, manifest, sections], default=str),
            *pages,
            *(record.getMessage() for record in caplog.records),
            caplog.text,
        ]
    )
    credentials = every_credential(provider)
    assert len(credentials) >= 5  # the client secret, two access and two refresh tokens
    leaked = [c for c in credentials if c in everything]
    assert leaked == []


def test_account_deletion_removes_integrations_apps_and_their_secrets(provider, ada):
    user, _, _ = ada
    ben, ben_agent, ben_client = person("ben")
    connect(ben_agent, ben_client, name="hub", app=byo_app(provider), requiredHosts=[API_HOST])
    out = io.StringIO()
    call_command("purge_account", user.email, "--yes", stdout=out)
    for model in (UserIntegration, UserOauthApp):
        assert not model.objects.filter(user_id=user.stable_user_id).exists()
        assert model.objects.filter(user_id=ben.stable_user_id).exists()
    assert not SecretEntry.objects.filter(bucket__user_id=user.stable_user_id).exists()
    assert SecretEntry.objects.filter(
        bucket__user_id=ben.stable_user_id, name="integration.hub.access_token"
    ).exists()
