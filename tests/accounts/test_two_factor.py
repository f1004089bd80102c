"""TOTP two-factor at /account/two-factor, with recovery codes: once on, every way into a
session — password sign-in, the admin, the OAuth consent page — asks for a code first. The
clock is frozen so the codes are the ones an authenticator app would show at that moment."""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest
from django.apps import apps as django_apps
from django.db import connection
from django.test import Client
from django_otp.oath import TOTP
from django_otp.plugins.otp_static.models import StaticDevice, StaticToken
from django_otp.plugins.otp_totp.models import TOTPDevice

from apps.accounts.models import User
from apps.accounts.services import recovery_codes, two_factor

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
PASSWORD = "correct-horse-battery-9"


def _app_code(user: User) -> str:
    """What the person's authenticator app shows right now."""
    device = TOTPDevice.objects.get(user=user)
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    return f"{totp.token():0{device.digits}d}"


def _turn_on(client: Client, user: User) -> list[str]:
    assert client.post("/account/two-factor/change", {"action": "start"}).status_code == 302
    page = client.get("/account/two-factor").content.decode()
    assert 'data-testid="totp-secret"' in page
    response = client.post(
        "/account/two-factor/change", {"action": "confirm", "code": _app_code(user)}
    )
    assert response.status_code == 200
    return response.context["codes"]


def _signed_in_with_password(user: User) -> Client:
    user.set_password(PASSWORD)
    user.save(update_fields=["password"])
    client = Client()
    response = client.post("/login", {"identifier": user.username, "password": PASSWORD})
    assert response.status_code == 302, response.content.decode()[:500]
    return client


def test_turning_it_on_gives_ten_single_use_recovery_codes(
    frozen_clock: object, owner: User, owner_client: Client
) -> None:
    assert 'href="/account/two-factor"' in owner_client.get("/account").content.decode()
    codes = _turn_on(owner_client, owner)
    assert len(codes) == 10 and len(set(codes)) == 10
    assert two_factor.enabled(owner)
    # The session that turned it on has just proved a code: it carries on without a prompt.
    assert owner_client.get("/account").status_code == 200
    page = owner_client.get("/account/two-factor").content.decode()
    assert "10 recovery codes left" in page and codes[0] not in page


def test_a_wrong_first_code_leaves_it_off(
    frozen_clock: object, owner: User, owner_client: Client
) -> None:
    owner_client.post("/account/two-factor/change", {"action": "start"})
    response = owner_client.post(
        "/account/two-factor/change", {"action": "confirm", "code": "000000"}
    )
    assert response.status_code == 422
    assert not two_factor.enabled(owner)


def test_every_sign_in_asks_for_the_current_code(
    frozen_clock, owner: User, owner_client: Client
) -> None:
    _turn_on(owner_client, owner)
    frozen_clock.shift(timedelta(minutes=5))  # a later sign-in, a later code
    client = _signed_in_with_password(owner)

    gated = client.get("/account/memories")
    assert gated.status_code == 302
    assert gated["Location"] == "/account/two-factor/verify?next=%2Faccount%2Fmemories"
    stale = client.post(
        "/account/two-factor/verify", {"code": "123456", "next": "/account/memories"}
    )
    assert stale.status_code == 400
    assert client.get("/account").status_code == 302
    # A failure throttles the next try (django-otp doubles the wait each time); a person
    # retyping takes longer than that.
    frozen_clock.shift(timedelta(seconds=5))

    ok = client.post(
        "/account/two-factor/verify", {"code": _app_code(owner), "next": "/account/memories"}
    )
    assert ok.status_code == 302 and ok["Location"] == "/account/memories"
    assert client.get("/account/memories").status_code == 200


def test_a_code_from_ten_minutes_ago_is_refused(
    frozen_clock, owner: User, owner_client: Client
) -> None:
    _turn_on(owner_client, owner)
    frozen_clock.shift(timedelta(minutes=1))
    old = _app_code(owner)
    frozen_clock.shift(timedelta(minutes=10))
    client = _signed_in_with_password(owner)
    assert client.post("/account/two-factor/verify", {"code": old}).status_code == 400


def test_a_recovery_code_works_once(frozen_clock, owner: User, owner_client: Client) -> None:
    codes = _turn_on(owner_client, owner)
    first = _signed_in_with_password(owner)
    assert first.post("/account/two-factor/verify", {"code": codes[0]}).status_code == 302
    assert first.get("/account").status_code == 200
    second = _signed_in_with_password(owner)
    frozen_clock.shift(timedelta(minutes=2))  # past django-otp's throttle delay
    assert second.post("/account/two-factor/verify", {"code": codes[0]}).status_code == 400
    assert two_factor.remaining_recovery_codes(owner) == 9


def test_the_admin_and_the_oauth_consent_page_are_behind_the_code(
    frozen_clock, operator: User
) -> None:
    operator_session = Client()
    operator_session.force_login(operator)
    _turn_on(operator_session, operator)
    client = Client()
    client.force_login(operator)  # the admin's own sign-in lands the same kind of session

    admin = client.get("/admin/")
    assert admin.status_code == 302 and admin["Location"].startswith("/account/two-factor/verify")
    consent = client.get("/oauth/authorize?client_id=x&response_type=code")
    assert consent.status_code == 302
    assert consent["Location"].startswith("/account/two-factor/verify")


def test_turning_it_off_needs_a_code(frozen_clock, owner: User, owner_client: Client) -> None:
    _turn_on(owner_client, owner)
    refused = owner_client.post("/account/two-factor/change", {"action": "disable", "code": "1"})
    assert refused.status_code == 422 and two_factor.enabled(owner)
    frozen_clock.shift(timedelta(minutes=1))
    owner_client.post("/account/two-factor/change", {"action": "disable", "code": _app_code(owner)})
    assert not two_factor.enabled(owner)


def test_someone_else_is_not_affected_and_cannot_see_it(
    frozen_clock, owner: User, owner_client: Client, outsider: User, outsider_client: Client
) -> None:
    codes = _turn_on(owner_client, owner)
    assert outsider_client.get("/account").status_code == 200
    page = outsider_client.get("/account/two-factor").content.decode()
    assert "Two-factor is <strong>off</strong>" in page
    assert not any(code in page for code in codes)
    # The owner's recovery code does not unlock the outsider's account either.
    assert two_factor.verify(outsider, codes[0]) is None


# --- recovery codes are kept only as keyed digests ---------------------------------------


def _recovery_table_text() -> str:
    """Everything the recovery-code table holds, as one string to search."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM otp_static_statictoken")
        return "\n".join(repr(row) for row in cursor.fetchall())


def test_the_database_never_holds_a_recovery_code_in_clear(
    frozen_clock, owner: User, owner_client: Client
) -> None:
    codes = _turn_on(owner_client, owner)
    again = owner_client.post("/account/two-factor/change", {"action": "regenerate"})
    fresh = again.context["codes"]
    assert len(fresh) == 10 and not set(fresh) & set(codes)
    table = _recovery_table_text().lower()
    assert StaticToken.objects.filter(device__user=owner).count() == 10
    for code in codes + fresh:
        assert recovery_codes.normalize(code) not in table and code not in table
    # The old set was replaced: none of its codes opens a session any more.
    client = _signed_in_with_password(owner)
    assert client.post("/account/two-factor/verify", {"code": codes[1]}).status_code == 400
    frozen_clock.shift(timedelta(minutes=2))
    # Typed the way people type: upper case, spaces instead of dashes.
    typed = fresh[3].upper().replace("-", " ")
    assert client.post("/account/two-factor/verify", {"code": typed}).status_code == 302


def test_a_wrong_recovery_code_fails_and_throttles_the_next_try(
    frozen_clock, owner: User, owner_client: Client
) -> None:
    codes = _turn_on(owner_client, owner)
    client = _signed_in_with_password(owner)
    assert (
        client.post("/account/two-factor/verify", {"code": "aaaa-bbbb-cccc-dddd"}).status_code
        == 400
    )
    device = StaticDevice.objects.get(user=owner)
    assert device.throttling_failure_count == 1
    # Inside the throttle window even the right code is refused, and it is not spent.
    assert client.post("/account/two-factor/verify", {"code": codes[0]}).status_code == 400
    assert two_factor.remaining_recovery_codes(owner) == 10
    frozen_clock.shift(timedelta(minutes=2))
    assert client.post("/account/two-factor/verify", {"code": codes[0]}).status_code == 302
    device.refresh_from_db()
    assert device.throttling_failure_count == 0
    assert two_factor.remaining_recovery_codes(owner) == 9


def test_one_persons_recovery_code_never_works_for_another(
    frozen_clock, owner: User, owner_client: Client, outsider: User, outsider_client: Client
) -> None:
    mine = _turn_on(owner_client, owner)
    frozen_clock.shift(timedelta(minutes=1))
    theirs = _turn_on(outsider_client, outsider)
    for code in mine:
        assert two_factor.verify(outsider, code) is None
        frozen_clock.shift(timedelta(minutes=20))  # past each (doubling) throttle delay
    assert two_factor.remaining_recovery_codes(owner) == 10
    assert two_factor.remaining_recovery_codes(outsider) == 10
    assert two_factor.verify(outsider, theirs[0]) is not None


def test_plain_codes_from_before_are_hashed_by_the_migration(
    frozen_clock, owner: User, owner_client: Client
) -> None:
    _turn_on(owner_client, owner)
    device = StaticDevice.objects.get(user=owner)
    device.token_set.all().delete()
    legacy = [StaticToken.random_token() for _ in range(2)]  # django-otp's own eight characters
    StaticToken.objects.bulk_create(StaticToken(device=device, token=c) for c in legacy)

    migration = importlib.import_module("apps.accounts.migrations.0008_hash_recovery_codes")
    migration.hash_plain_codes(django_apps, None)
    migration.hash_plain_codes(django_apps, None)  # a second run changes nothing

    table = _recovery_table_text()
    assert not any(code in table for code in legacy)
    assert two_factor.verify(owner, legacy[0]) is not None
    frozen_clock.shift(timedelta(minutes=2))
    assert two_factor.verify(owner, legacy[0]) is None  # spent
    frozen_clock.shift(timedelta(minutes=2))
    assert two_factor.verify(owner, legacy[1]) is not None
