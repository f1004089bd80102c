"""mcp_agent_sessions: which agents used /mcp for a person, first and last seen, written with
the debounced last-use stamp (never per request: /mcp stays stateless)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from apps.accounts.models import McpAgentSession, User
from apps.accounts.services.tokens import authenticate_bearer, note_mcp_use
from tests.accounts.factories import AccessTokenFactory, OAuthAccessTokenFactory, OAuthGrantFactory
from tests.clock import FROZEN_AT

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _use(raw: str) -> None:
    token = authenticate_bearer(raw)
    assert token is not None
    note_mcp_use(token)


def test_each_agent_gets_one_row_with_first_and_last_seen(owner: User, frozen_clock: Any) -> None:
    pat = AccessTokenFactory(user=owner, name="laptop")
    oauth = OAuthAccessTokenFactory(grant=OAuthGrantFactory(user=owner, client_name="Cursor"))

    _use(pat.raw)
    _use(oauth.raw)
    frozen_clock.shift(timedelta(minutes=1))
    _use(pat.raw)  # inside the five-minute debounce: no write
    frozen_clock.shift(timedelta(minutes=10))
    _use(pat.raw)

    rows = {
        row.client_id: row for row in McpAgentSession.objects.filter(user_id=owner.stable_user_id)
    }
    assert set(rows) == {f"pat:{pat.pk}", oauth.client_id}
    assert rows[f"pat:{pat.pk}"].created_at == FROZEN_AT
    assert rows[f"pat:{pat.pk}"].last_seen_at == FROZEN_AT + timedelta(minutes=11)
    assert rows[oauth.client_id].client_name == "Cursor"
    assert rows[oauth.client_id].last_seen_at == FROZEN_AT


def test_another_persons_agents_are_theirs(owner: User, outsider: User) -> None:
    _use(AccessTokenFactory(user=owner).raw)
    assert not McpAgentSession.objects.filter(user_id=outsider.stable_user_id).exists()
    assert McpAgentSession.objects.filter(user_id=owner.stable_user_id).count() == 1
