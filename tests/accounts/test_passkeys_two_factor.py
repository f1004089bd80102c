"""Passkeys and TOTP two-factor together: after a password sign-in a passkey stands in for the
code; a passkey sign-in still asks for a code (the passkey was the first factor). The clock is
frozen so the TOTP codes are predictable."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import Passkey, User
from apps.accounts.services import passkeys
from tests.accounts.softauthn import SoftAuthenticator
from tests.accounts.test_passkeys import _json, _post, _register, _sign_in, authenticator
from tests.accounts.test_two_factor import _app_code, _signed_in_with_password, _turn_on

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
__all__ = ["authenticator"]  # the fixture, imported for this module's tests


def _verify_with_passkey(client: Client, authenticator: SoftAuthenticator) -> object:
    options = _post(client, "/webauthn/verify/options")
    assert options.status_code == 200, options.content
    answer = authenticator.get(_json(options))
    return _post(client, "/webauthn/verify?next=/account/memories", {"credential": answer})


def test_a_passkey_stands_in_for_the_code_after_a_password_sign_in(
    frozen_clock: object,
    owner: User,
    owner_client: Client,
    authenticator: SoftAuthenticator,
) -> None:
    _turn_on(owner_client, owner)
    _register(owner_client, authenticator)
    client = _signed_in_with_password(owner)
    assert client.get("/account/memories").status_code == 302
    prompt = client.get("/account/two-factor/verify").content.decode()
    assert "Use a passkey" in prompt

    verified = _verify_with_passkey(client, authenticator)
    assert verified.status_code == 200 and _json(verified) == {"redirect": "/account/memories"}
    assert client.get("/account/memories").status_code == 200
    # The OAuth consent page (behind the same gate) opens too.
    consent = client.get("/oauth/authorize?client_id=x&response_type=code")
    assert not consent.get("Location", "").startswith("/account/two-factor/verify")


def test_a_removed_passkey_no_longer_vouches_for_the_session(
    frozen_clock: object, owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _turn_on(owner_client, owner)
    _register(owner_client, authenticator)
    client = _signed_in_with_password(owner)
    assert _verify_with_passkey(client, authenticator).status_code == 200
    Passkey.objects.filter(user=owner).delete()
    assert client.get("/account/memories").status_code == 302


def test_a_passkey_sign_in_still_asks_for_the_code(
    frozen_clock: Any, owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _turn_on(owner_client, owner)
    _register(owner_client, authenticator)
    client = Client()
    assert _sign_in(client, authenticator).status_code == 200
    gated = client.get("/account/memories")
    assert gated.status_code == 302
    assert gated["Location"].startswith("/account/two-factor/verify")
    # The passkey that signed in cannot also be the second factor.
    assert "Use a passkey" not in client.get("/account/two-factor/verify").content.decode()
    assert _post(client, "/webauthn/verify/options").status_code == 403
    frozen_clock.shift(timedelta(minutes=1))  # the code that turned it on is spent
    ok = client.post("/account/two-factor/verify", {"code": _app_code(owner)})
    assert ok.status_code == 302
    assert client.get("/account/memories").status_code == 200


def test_without_two_factor_a_passkey_sign_in_is_enough(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator)
    client = Client()
    assert _sign_in(client, authenticator).status_code == 200
    assert client.get("/account/memories").status_code == 200


# --- the admin's own sign-in form ----------------------------------------------------------


def test_the_admin_login_form_offers_a_passkey_and_the_gate_still_applies(
    frozen_clock, operator: User, outsider: User
) -> None:
    rp_id, origin = passkeys.relying_party()
    key = SoftAuthenticator(origin, rp_id)
    setup = Client()
    setup.force_login(operator)
    options = setup.post("/webauthn/register/options", "{}", content_type="application/json")
    credential = key.create(json.loads(options.content))
    registered = setup.post(
        "/webauthn/register",
        json.dumps({"credential": credential, "name": "Key"}),
        content_type="application/json",
    )
    assert registered.status_code == 200, registered.content

    page = Client().get("/admin/login/?next=/admin/").content.decode()
    assert 'data-testid="admin-passkey"' in page and "kody-passkeys.js" in page
    assert "/webauthn/authenticate?next=/admin/" in page

    client = Client()
    options = client.post("/webauthn/authenticate/options", "{}", content_type="application/json")
    answer = key.get(json.loads(options.content))
    signed = client.post(
        "/webauthn/authenticate?next=/admin/",
        json.dumps({"credential": answer}),
        content_type="application/json",
    )
    assert signed.status_code == 200 and json.loads(signed.content)["redirect"] == "/admin/"
    assert client.get("/admin/").status_code == 200

    # With two-factor on, the same passkey sign-in still meets the code prompt before /admin/.
    _turn_on(setup, operator)
    frozen_clock.shift(timedelta(minutes=1))
    later = Client()
    options = later.post("/webauthn/authenticate/options", "{}", content_type="application/json")
    answer = key.get(json.loads(options.content))
    later.post(
        "/webauthn/authenticate?next=/admin/",
        json.dumps({"credential": answer}),
        content_type="application/json",
    )
    gated = later.get("/admin/")
    assert gated.status_code == 302
    assert gated["Location"].startswith("/account/two-factor/verify")

    # Someone who is not an operator signs in with their passkey but gets no admin page.
    outsider_session = Client()
    outsider_session.force_login(outsider)
    options = outsider_session.post(
        "/webauthn/register/options", "{}", content_type="application/json"
    )
    theirs = SoftAuthenticator(origin, rp_id)
    outsider_session.post(
        "/webauthn/register",
        json.dumps({"credential": theirs.create(json.loads(options.content)), "name": "K"}),
        content_type="application/json",
    )
    stranger = Client()
    options = stranger.post("/webauthn/authenticate/options", "{}", content_type="application/json")
    stranger.post(
        "/webauthn/authenticate?next=/admin/",
        json.dumps({"credential": theirs.get(json.loads(options.content))}),
        content_type="application/json",
    )
    assert stranger.get("/admin/").status_code == 302
