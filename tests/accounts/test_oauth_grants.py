"""OAuth grants as a person sees them: first use, the second-agent gift, revoke, purge, export."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from django.utils import timezone
from oauth2_provider.models import AccessToken as ToolkitAccessToken
from oauth2_provider.models import Application, Grant, RefreshToken

from apps.accounts.export import service as export
from apps.accounts.models import AccessToken, User
from apps.accounts.oauth import grants
from apps.accounts.services.tokens import list_tokens
from tests.accounts.factories import (
    AccessTokenFactory,
    OAuthAccessTokenFactory,
    OAuthApplicationFactory,
    OAuthGrantFactory,
    UserFactory,
)
from tests.clock import FROZEN_AT

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_first_use_sets_the_signals_once(owner: User, frozen_clock: Any) -> None:
    grant = OAuthGrantFactory(user=owner, client_name="Claude Code")
    token = OAuthAccessTokenFactory(grant=grant)

    assert grants.record_use(token) is False
    owner.refresh_from_db()
    grant.refresh_from_db()
    assert grant.first_used_at == FROZEN_AT and grant.last_used_at == FROZEN_AT
    assert owner.first_mcp_connected_at == FROZEN_AT
    assert owner.mcp_client_name == "Claude Code"

    frozen_clock.shift(timedelta(minutes=10))
    second = OAuthGrantFactory(user=owner, client_name="Cursor")
    grants.record_use(OAuthAccessTokenFactory(grant=second))
    owner.refresh_from_db()
    assert owner.first_mcp_connected_at == FROZEN_AT  # the first connection stays the first
    assert owner.mcp_client_name == "Claude Code"


def test_last_use_is_debounced(owner: User, frozen_clock: Any) -> None:
    grant = OAuthGrantFactory(user=owner)
    token = OAuthAccessTokenFactory(grant=grant)
    grants.record_use(token)
    frozen_clock.shift(timedelta(minutes=2))
    grants.record_use(token)
    grant.refresh_from_db()
    assert grant.last_used_at == FROZEN_AT
    frozen_clock.shift(timedelta(minutes=4))
    grants.record_use(token)
    grant.refresh_from_db()
    assert grant.last_used_at == FROZEN_AT + timedelta(minutes=6)


def test_the_second_distinct_client_gives_a_free_account_fourteen_days_of_standard(
    owner: User, frozen_clock: Any
) -> None:
    first = OAuthGrantFactory(user=owner)
    assert grants.record_use(OAuthAccessTokenFactory(grant=first)) is False
    # Another token of the same client is not a second agent.
    assert grants.record_use(OAuthAccessTokenFactory(grant=first)) is False
    owner.refresh_from_db()
    assert owner.second_agent_standard_gift_granted_at is None

    second = OAuthGrantFactory(user=owner)
    assert grants.record_use(OAuthAccessTokenFactory(grant=second)) is True

    owner.refresh_from_db()
    assert owner.second_agent_standard_gift_granted_at == FROZEN_AT
    assert owner.second_agent_standard_gift_expires_at == FROZEN_AT + timedelta(days=14)
    # Written once: a third client changes nothing.
    frozen_clock.shift(timedelta(days=1))
    assert grants.record_use(OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=owner))) is False
    owner.refresh_from_db()
    assert owner.second_agent_standard_gift_granted_at == FROZEN_AT


def test_a_paid_account_gets_the_ledger_entry_but_no_overlay(frozen_clock: Any) -> None:
    paying = UserFactory(subscribed=True, stripe_plan="standard")
    for _ in range(2):
        grants.record_use(OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=paying)))
    paying.refresh_from_db()
    assert paying.second_agent_standard_gift_granted_at == FROZEN_AT
    assert paying.second_agent_standard_gift_expires_at is None


def test_one_persons_clients_never_count_for_another(owner: User, outsider: User) -> None:
    grants.record_use(OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=owner)))
    grants.record_use(OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=outsider)))
    for person in (owner, outsider):
        person.refresh_from_db()
        assert person.second_agent_standard_gift_granted_at is None


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_two_clients_connecting_at_once_write_the_gift_once() -> None:
    person = UserFactory()
    tokens = [OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=person)) for _ in range(2)]
    start = threading.Barrier(2)
    wrote: list[bool] = []

    def connect(token: AccessToken) -> None:
        try:
            start.wait()
            wrote.append(grants.record_use(token))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=connect, args=(token,)) for token in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(wrote) == [False, True]
    person.refresh_from_db()
    granted = person.second_agent_standard_gift_granted_at
    assert granted is not None
    assert person.second_agent_standard_gift_expires_at == granted + timedelta(days=14)


def test_revoke_is_the_owners_only(owner: User, outsider: User) -> None:
    grant = OAuthGrantFactory(user=owner)
    with pytest.raises(grants.GrantNotFound):
        grants.revoke_grant(outsider, grant.pk)
    grant.refresh_from_db()
    assert grant.revoked_at is None

    grants.revoke_grant(owner, grant.pk)
    grant.refresh_from_db()
    assert grant.revoked_at is not None
    assert grants.list_grants(owner) == []


def test_access_token_list_shows_both_kinds_but_not_expired_oauth_tokens(owner: User) -> None:
    pat = AccessTokenFactory(user=owner)
    live = OAuthAccessTokenFactory(
        grant=OAuthGrantFactory(user=owner), expires_at=timezone.now() + timedelta(hours=1)
    )
    OAuthAccessTokenFactory(
        grant=OAuthGrantFactory(user=owner), expires_at=timezone.now() - timedelta(minutes=1)
    )
    assert {t.pk for t in list_tokens(owner)} == {pat.pk, live.pk}


def test_purge_removes_expired_codes_and_tokens_in_batches(owner: User) -> None:
    grant = OAuthGrantFactory(user=owner)
    now = timezone.now()
    for n in range(5):
        Grant.objects.create(
            application=grant.application, user=owner, code=f"code{n}",
            expires=now - timedelta(minutes=1), redirect_uri="http://127.0.0.1/cb",
            scope="account", code_challenge="x", code_challenge_method="S256",
        )  # fmt: skip
    fresh = Grant.objects.create(
        application=grant.application, user=owner, code="fresh",
        expires=now + timedelta(minutes=1), redirect_uri="http://127.0.0.1/cb",
        scope="account", code_challenge="x", code_challenge_method="S256",
    )  # fmt: skip
    expired = ToolkitAccessToken.objects.create(
        user=owner, application=grant.application, token="", token_checksum="a" * 64,
        expires=now - timedelta(hours=1), scope="account",
    )  # fmt: skip
    OAuthAccessTokenFactory(grant=grant, oauth_token=expired)
    dead = RefreshToken.objects.create(
        user=owner, application=grant.application, token="", token_checksum="b" * 64,
        revoked=now - timedelta(days=1),
    )  # fmt: skip

    abandoned = OAuthApplicationFactory()
    Application.objects.filter(pk=abandoned.pk).update(created=now - timedelta(days=2))
    Application.objects.filter(pk=grant.application_id).update(created=now - timedelta(days=2))
    recent = OAuthApplicationFactory()

    counts = grants.purge_expired(batch=2)

    assert counts == {
        "codes": 5,
        "refresh_tokens": 1,
        "access_tokens": 1,
        "abandoned_clients": 1,
    }
    assert not Application.objects.filter(pk=abandoned.pk).exists()
    assert Application.objects.filter(pk__in=[grant.application_id, recent.pk]).count() == 2
    assert list(Grant.objects.values_list("pk", flat=True)) == [fresh.pk]
    assert not RefreshToken.objects.filter(pk=dead.pk).exists()
    assert not AccessToken.objects.filter(oauth_token_id=expired.pk).exists()


def test_the_purge_lane_is_registered_every_tick() -> None:
    from kody.discovery import autodiscover
    from kody.lanes import Cadence
    from kody.lanes.registry import get

    autodiscover()
    lane = get("oauth_purge_expired")
    assert lane is not None and lane.cadence is Cadence.EVERY_TICK


def test_export_has_an_oauth_grants_section_without_tokens(owner: User, outsider: User) -> None:
    grant = OAuthGrantFactory(user=owner, client_name="Claude Code", scopes=["account"])
    token = OAuthAccessTokenFactory(grant=grant)
    OAuthGrantFactory(user=outsider)

    manifest = export.manifest(owner)
    assert {"section": "oauth_grants", "count": 1} in manifest["sections"]
    page = export.section(owner, "oauth_grants")
    (row,) = page["page"]["grants"]
    assert row["clientName"] == "Claude Code" and row["scopes"] == ["account"]
    assert row["clientId"] == grant.client_id
    text = str(page)
    assert token.token_hash not in text and token.raw not in text
    assert "token" not in " ".join(row).lower()
    assert export.section(outsider, "oauth_grants")["page"]["grants"][0]["clientId"] != (
        grant.client_id
    )


def test_open_registration_is_bounded_per_address(client: Any, settings: Any) -> None:
    settings.KODY_OAUTH_REGISTRATIONS_PER_HOUR = 5
    from django.core.cache import cache

    from apps.accounts.oauth.views import registration_limit

    cache.delete_pattern("oauth-register:*")
    body = {"client_name": "x", "redirect_uris": ["http://127.0.0.1:1/cb"],
            "token_endpoint_auth_method": "none"}  # fmt: skip
    for _ in range(registration_limit()):
        assert (
            client.post("/oauth/register", body, content_type="application/json").status_code == 201
        )
    refused = client.post("/oauth/register", body, content_type="application/json")
    assert refused.status_code == 429 and refused.json()["error"] == "rate_limited"
    assert Application.objects.count() == registration_limit()
    cache.delete_pattern("oauth-register:*")
