from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from apps.accounts.models import AccessToken, AuditEvent, User
from apps.accounts.services import audit
from apps.accounts.services.tokens import (
    CREATE_LIMIT,
    LAST_USED_DEBOUNCE,
    TokenNotFound,
    authenticate_bearer,
    create_token,
    list_tokens,
    revoke_token,
)
from kody.errors import AccountDeleting, InvalidInput, RateLimited

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_create_token_shows_the_secret_once_and_stores_only_its_hash(owner: User) -> None:
    token, raw = create_token(owner, "  my   laptop ")

    assert raw.startswith("kody_pat_") and len(raw) > 40
    assert token.name == "my laptop"
    assert token.kind == "pat" and token.client_id is None and token.scopes == ["*"]
    assert token.token_prefix == raw[:13]
    assert token.token_hash == hashlib.sha256(raw.encode()).hexdigest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM access_tokens WHERE id = %s", [token.pk])
        row = cursor.fetchone()
    assert raw not in [str(value) for value in row]


def test_each_token_is_different(owner: User) -> None:
    secrets = {create_token(owner, f"t{i}")[1] for i in range(5)}
    assert len(secrets) == 5


@pytest.mark.parametrize("name", ["", "   ", "x" * 101])
def test_token_needs_a_reasonable_name(owner: User, name: str) -> None:
    with pytest.raises(InvalidInput):
        create_token(owner, name)
    assert not AccessToken.objects.exists()


def test_deleting_account_cannot_create_tokens(owner: User) -> None:
    owner.deleting_at = timezone.now()
    owner.save()
    with pytest.raises(AccountDeleting):
        create_token(owner, "late")


def test_list_tokens_shows_only_the_owners_active_tokens(owner: User, outsider: User) -> None:
    first, _ = create_token(owner, "first")
    second, _ = create_token(owner, "second")
    gone, _ = create_token(owner, "gone")
    create_token(outsider, "not yours")
    revoke_token(owner, gone.pk)

    assert [t.name for t in list_tokens(owner)] == ["second", "first"]
    assert {t.name for t in list_tokens(owner, include_revoked=True)} == {
        "first",
        "second",
        "gone",
    }


def test_revoke_token_stops_the_secret_working(owner_token: tuple[AccessToken, str]) -> None:
    token, raw = owner_token
    revoked = revoke_token(token.user, token.pk)

    assert revoked.revoked_at is not None
    assert authenticate_bearer(raw) is None


def test_revoke_is_idempotent(owner_token: tuple[AccessToken, str]) -> None:
    token, _ = owner_token
    first = revoke_token(token.user, token.pk).revoked_at
    again = revoke_token(token.user, token.pk).revoked_at
    assert first == again


def test_outsider_cannot_revoke_someone_elses_token(
    owner_token: tuple[AccessToken, str], outsider: User
) -> None:
    token, raw = owner_token
    with pytest.raises(TokenNotFound) as caught:
        revoke_token(outsider, token.pk)

    assert caught.value.status == 404
    assert authenticate_bearer(raw) == token


def test_revoking_a_missing_token_is_not_found(owner: User) -> None:
    with pytest.raises(TokenNotFound):
        revoke_token(owner, 999_999)


def test_authenticate_bearer_resolves_a_live_token(owner_token: tuple[AccessToken, str]) -> None:
    token, raw = owner_token
    found = authenticate_bearer(raw)
    assert found is not None and found.pk == token.pk and found.user == token.user


@pytest.mark.parametrize("presented", ["", "kody_pat_wrong", "Bearer x", "x" * 5000, None])
def test_authenticate_bearer_refuses_unknown_secrets(
    owner_token: tuple[AccessToken, str], presented: str | None
) -> None:
    assert authenticate_bearer(presented) is None


def test_authenticate_bearer_refuses_expired_tokens(owner: User) -> None:
    token, raw = create_token(owner, "short", expires_at=timezone.now() + timedelta(hours=1))
    assert authenticate_bearer(raw) is not None
    AccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert authenticate_bearer(raw) is None


@pytest.mark.parametrize(
    "change",
    [
        {"deleting_at": "now"},
        {"suspended_at": "now"},
        {"is_active": False},
    ],
)
def test_authenticate_bearer_refuses_unusable_accounts(
    owner_token: tuple[AccessToken, str], change: dict[str, object]
) -> None:
    token, raw = owner_token
    values = {k: (timezone.now() if v == "now" else v) for k, v in change.items()}
    User.objects.filter(pk=token.user_id).update(**values)
    assert authenticate_bearer(raw) is None


def test_last_used_is_written_on_first_use(owner_token: tuple[AccessToken, str]) -> None:
    token, raw = owner_token
    assert token.last_used_at is None
    authenticate_bearer(raw)
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_last_used_is_debounced_to_five_minutes(
    owner_token: tuple[AccessToken, str], django_assert_num_queries
) -> None:
    token, raw = owner_token
    recent = timezone.now() - LAST_USED_DEBOUNCE + timedelta(seconds=30)
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=recent)

    authenticate_bearer(raw)
    token.refresh_from_db()
    assert token.last_used_at == recent

    stale = timezone.now() - LAST_USED_DEBOUNCE - timedelta(seconds=1)
    AccessToken.objects.filter(pk=token.pk).update(last_used_at=stale)
    authenticate_bearer(raw)
    token.refresh_from_db()
    assert token.last_used_at > stale


def test_a_fresh_token_costs_no_write_per_call(
    owner_token: tuple[AccessToken, str], django_assert_num_queries
) -> None:
    _, raw = owner_token
    authenticate_bearer(raw)
    # One SELECT plus the conditional UPDATE that matches nothing inside the window.
    with django_assert_num_queries(2) as captured:
        authenticate_bearer(raw)
    update = captured.captured_queries[-1]["sql"]
    assert update.startswith("UPDATE") and "last_used_at" in update


def test_token_creation_is_rate_limited(owner: User) -> None:
    for i in range(CREATE_LIMIT):
        create_token(owner, f"t{i}")
    with pytest.raises(RateLimited) as caught:
        create_token(owner, "one too many")

    assert caught.value.status == 429
    assert AccessToken.objects.filter(user=owner).count() == CREATE_LIMIT
    assert AuditEvent.objects.filter(action="token_create", result="rate_limited").count() == 1


def test_rate_limit_is_per_user(owner: User, outsider: User) -> None:
    for i in range(CREATE_LIMIT):
        create_token(owner, f"t{i}")
    create_token(outsider, "still fine")


def test_create_and_revoke_are_audited_without_secrets(owner: User) -> None:
    token, raw = create_token(owner, "audited", ip="203.0.113.9")
    revoke_token(owner, token.pk, ip="203.0.113.9")

    rows = list(AuditEvent.objects.order_by("id"))
    assert [(r.category, r.action, r.result) for r in rows] == [
        ("auth", "token_create", "success"),
        ("auth", "token_revoke", "success"),
    ]
    for row in rows:
        assert row.email_hash == audit.email_hash(owner.email)
        assert row.ip_hash == audit.ip_hash("203.0.113.9")
        assert row.client_id == f"pat:{token.pk}"
        flattened = " ".join(str(v) for v in vars(row).values())
        assert raw not in flattened and token.token_hash not in flattened
        assert owner.email not in flattened


def test_revoking_twice_audits_once(owner_token: tuple[AccessToken, str]) -> None:
    token, _ = owner_token
    revoke_token(token.user, token.pk)
    revoke_token(token.user, token.pk)
    assert AuditEvent.objects.filter(action="token_revoke").count() == 1
