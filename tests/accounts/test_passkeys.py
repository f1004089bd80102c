"""Passkeys over HTTP with a software authenticator: register at ``/webauthn/register``, list,
rename and remove at ``/account/passkeys``, sign in at ``/webauthn/authenticate``, and stand in
for the TOTP code at ``/webauthn/verify``. Every answer is checked by the server (the
``webauthn`` package) against a challenge it minted; another person's passkey is unknown."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client

from apps.accounts.models import AuditEvent, Passkey, User
from apps.accounts.services import audit, passkeys
from tests.accounts.softauthn import SoftAuthenticator

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def authenticator() -> SoftAuthenticator:
    rp_id, origin = passkeys.relying_party()
    return SoftAuthenticator(origin, rp_id)


def _json(response: Any) -> dict[str, Any]:
    return json.loads(response.content)


def _post(client: Client, path: str, body: object = None) -> Any:
    return client.post(path, json.dumps(body or {}), content_type="application/json")


def _register(
    client: Client, authenticator: SoftAuthenticator, name: str = "Laptop", **kw: Any
) -> Any:
    options = _post(client, "/webauthn/register/options")
    assert options.status_code == 200, options.content
    credential = authenticator.create(_json(options), **kw)
    return _post(client, "/webauthn/register", {"credential": credential, "name": name})


def _sign_in(client: Client, authenticator: SoftAuthenticator, **kw: Any) -> Any:
    options = _post(client, "/webauthn/authenticate/options")
    assert options.status_code == 200
    answer = authenticator.get(_json(options), **kw)
    return _post(client, "/webauthn/authenticate?next=/account/usage", {"credential": answer})


def _actions(email: str) -> list[tuple[str, str]]:
    rows = AuditEvent.objects.filter(email_hash=audit.email_hash(email)).order_by("pk")
    return [(r.action, r.result) for r in rows]


def test_owner_registers_lists_and_signs_in_with_a_passkey(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    response = _register(owner_client, authenticator, "  Work   laptop ")
    assert response.status_code == 200, response.content
    key = Passkey.objects.get(user=owner)
    assert _json(response) == {
        "passkey": {"id": key.id, "name": "Work laptop"},
        "redirect": "/account/passkeys",
    }
    assert key.counter == 0 and key.backed_up and key.device_type == "multi_device"
    assert key.transports == "internal,hybrid" and key.webauthn_user_handle
    page = owner_client.get("/account/passkeys").content.decode()
    assert "Work laptop" in page and "Not yet" in page
    assert key.public_key not in page  # the key material is never shown

    # A second passkey carries the same user handle (one per person, not per key).
    second = SoftAuthenticator(authenticator.origin, authenticator.rp_id)
    assert _register(owner_client, second, "Phone").status_code == 200
    handles = set(Passkey.objects.filter(user=owner).values_list("webauthn_user_handle", flat=1))
    assert len(handles) == 1

    anonymous = Client()
    signed_in = _sign_in(anonymous, authenticator)
    assert signed_in.status_code == 200, signed_in.content
    assert _json(signed_in) == {"redirect": "/account/usage"}
    assert anonymous.get("/account/usage").status_code == 200
    key.refresh_from_db()
    assert key.counter == 1 and key.last_used_at is not None
    assert ("passkey_register", "success") in _actions(owner.email)
    assert ("passkey_login", "success") in _actions(owner.email)


def test_sign_in_refuses_a_replayed_answer_and_a_cloned_counter(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator)
    client = Client()
    options = _json(_post(client, "/webauthn/authenticate/options"))
    answer = authenticator.get(options)
    assert _post(client, "/webauthn/authenticate", {"credential": answer}).status_code == 200

    # The challenge was spent: the same answer again is refused, even in the same session.
    replay = _post(client, "/webauthn/authenticate", {"credential": answer})
    assert replay.status_code == 422 and _json(replay)["error"]["code"] == "passkey_refused"

    # A clone of the authenticator whose counter lags behind is refused.
    authenticator.credentials[0].sign_count = 0
    cloned = _sign_in(Client(), authenticator)
    assert cloned.status_code == 422
    assert ("passkey_login", "failure") in _actions(owner.email)


def test_answers_for_another_origin_or_without_user_verification_are_refused(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    phishing = _register(owner_client, authenticator, origin="https://kody.example.evil")
    assert phishing.status_code == 422
    assert not Passkey.objects.exists()

    lazy = SoftAuthenticator(authenticator.origin, authenticator.rp_id, user_verified=False)
    assert _register(owner_client, lazy).status_code == 422
    assert not Passkey.objects.exists()

    assert _register(owner_client, authenticator).status_code == 200
    assert _sign_in(Client(), authenticator, origin="https://elsewhere.example").status_code == 422
    authenticator.user_verified = False
    assert _sign_in(Client(), authenticator).status_code == 422


def test_an_answer_without_its_challenge_or_malformed_is_a_coded_4xx(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    options = _json(_post(owner_client, "/webauthn/register/options"))
    credential = authenticator.create(options)
    # Not JSON, not an object, a credential of the wrong shape, an oversized body.
    for body in (b"nope", b"[]", b'{"credential": {"id": 1}}', b"{" + b" " * 20000 + b"}"):
        response = owner_client.post("/webauthn/register", body, content_type="application/json")
        assert response.status_code == 422, body[:20]
        assert _json(response)["error"]["code"] == "passkey_refused"
    # Each failed answer spent the challenge: the good answer now has nothing to match.
    late = _post(owner_client, "/webauthn/register", {"credential": credential})
    assert late.status_code == 422
    assert not Passkey.objects.exists()
    # Registering needs a session; signing in with nothing registered finds nothing.
    assert _post(Client(), "/webauthn/register/options").status_code == 401
    unknown = _sign_in(Client(), authenticator)
    assert unknown.status_code == 422


def test_the_same_passkey_cannot_be_registered_twice(
    owner: User,
    owner_client: Client,
    outsider_client: Client,
    authenticator: SoftAuthenticator,
) -> None:
    assert _register(owner_client, authenticator).status_code == 200
    key = Passkey.objects.get()
    # The options list it as excluded; an authenticator that ignores that is refused anyway,
    # whether the owner or someone else presents that credential id again.
    options = _json(_post(owner_client, "/webauthn/register/options"))
    assert [c["id"] for c in options["excludeCredentials"]] == [key.id]
    for client in (owner_client, outsider_client):
        options = _json(_post(client, "/webauthn/register/options"))
        credential = authenticator.create(options, reuse=authenticator.credentials[0])
        again = _post(client, "/webauthn/register", {"credential": credential})
        assert again.status_code == 422, again.content
    assert list(Passkey.objects.values_list("id", "user_id", "public_key")) == [
        (key.id, owner.pk, key.public_key)
    ]


def test_outsider_neither_sees_nor_changes_nor_uses_the_owners_passkey(
    owner: User,
    outsider: User,
    owner_client: Client,
    outsider_client: Client,
    authenticator: SoftAuthenticator,
) -> None:
    _register(owner_client, authenticator, "Ada's key")
    key = Passkey.objects.get(user=owner)

    page = outsider_client.get("/account/passkeys").content.decode()
    assert "Ada&#x27;s key" not in page and key.id not in page
    assert "You have no passkeys yet." in page
    rename = outsider_client.post(f"/account/passkeys/{key.id}/rename", {"name": "mine"})
    delete = outsider_client.post(f"/account/passkeys/{key.id}/delete")
    assert rename.status_code == 404 and delete.status_code == 404
    key.refresh_from_db()
    assert key.name == "Ada's key"

    # As the outsider's second factor, the owner's passkey is unknown.
    assert _post(outsider_client, "/webauthn/verify/options").status_code == 404
    options = _json(_post(owner_client, "/webauthn/verify/options"))
    answer = authenticator.get(options)
    refused = _post(outsider_client, "/webauthn/verify", {"credential": answer})
    assert refused.status_code == 422
    assert not outsider_client.session.get("kody.two_factor.passkey")


def test_owner_renames_and_removes_a_passkey_which_then_stops_working(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator)
    key = Passkey.objects.get(user=owner)
    blank = owner_client.post(f"/account/passkeys/{key.id}/rename", {"name": "   "})
    assert blank.status_code == 422
    renamed = owner_client.post(f"/account/passkeys/{key.id}/rename", {"name": "x" * 200})
    assert renamed.status_code == 302
    key.refresh_from_db()
    assert key.name == "x" * passkeys.NAME_MAX

    assert owner_client.post(f"/account/passkeys/{key.id}/delete").status_code == 302
    assert not Passkey.objects.filter(user=owner).exists()
    assert _sign_in(Client(), authenticator).status_code == 422
    actions = _actions(owner.email)
    assert ("passkey_rename", "success") in actions and ("passkey_delete", "success") in actions


def test_passkey_sign_in_is_refused_for_a_suspended_account(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator)
    User.objects.filter(pk=owner.pk).update(is_active=False)
    client = Client()
    response = _sign_in(client, authenticator)
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session


def test_repeated_failures_are_throttled_like_password_sign_in(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator)
    Passkey.objects.filter(user=owner).update(counter=100)
    good = authenticator.credentials[0]
    for _ in range(10):
        good.sign_count = 0  # a lagging counter: a failure charged to the owner's account
        assert _sign_in(Client(), authenticator).status_code == 422
    good.sign_count = 500
    throttled = _sign_in(Client(), authenticator)
    assert throttled.status_code == 429
    assert ("passkey_login", "rate_limited") in _actions(owner.email)


def test_an_outsider_presenting_the_owners_passkey_spends_only_their_own_budget(
    owner: User,
    owner_client: Client,
    outsider_client: Client,
    authenticator: SoftAuthenticator,
) -> None:
    _register(owner_client, authenticator)
    theirs = SoftAuthenticator(authenticator.origin, authenticator.rp_id)
    _register(outsider_client, theirs)
    owners_key = authenticator.credentials[0]
    for _ in range(10):
        options = _json(_post(outsider_client, "/webauthn/verify/options"))
        answer = authenticator.get(options, credential=owners_key)
        assert _post(outsider_client, "/webauthn/verify", {"credential": answer}).status_code == 422
    options = _json(_post(outsider_client, "/webauthn/verify/options"))
    answer = theirs.get(options)
    assert _post(outsider_client, "/webauthn/verify", {"credential": answer}).status_code == 429
    # The owner was never charged: their passkey still signs them in.
    assert _sign_in(Client(), authenticator).status_code == 200


def test_the_last_way_to_sign_in_cannot_be_removed_but_one_of_several_can(
    owner: User, owner_client: Client, authenticator: SoftAuthenticator
) -> None:
    _register(owner_client, authenticator, name="Laptop")
    owner.set_unusable_password()  # a password-less (social) account
    owner.save(update_fields=["password"])
    owner_client.force_login(owner)
    key = Passkey.objects.get(user=owner)

    refused = owner_client.post(f"/account/passkeys/{key.id}/delete")
    assert refused.status_code == 409
    assert b"only way left to sign in" in refused.content
    assert Passkey.objects.filter(pk=key.pk).exists()
    assert ("passkey_delete", "failure") in _actions(owner.email)

    second = SoftAuthenticator(*reversed(passkeys.relying_party()))
    assert _register(owner_client, second, name="Phone").status_code == 200
    assert owner_client.post(f"/account/passkeys/{key.id}/delete").status_code == 302
    assert list(Passkey.objects.filter(user=owner).values_list("name", flat=True)) == ["Phone"]
