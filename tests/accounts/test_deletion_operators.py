"""Operator surfaces of deletion: the unverified purge and write-lease repair."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.test import override_settings
from django.utils import timezone

from apps.accounts.models import AccountWriteLeaseRepair, AuditEvent, User
from apps.entitlements.actor import UserMeter
from config.buckets import bucket_storages
from kody.capabilities.invoke import Context, invoke
from kody.errors import Forbidden, KodyError
from kody.lanes import run_lane
from tests.accounts.factories import OAuthConnectionFactory, UserFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield


def make_user(name: str, *, verified: bool, age_days: int, staff: bool = False) -> User:
    # Run-unique people, not the cast: these tests commit and purge whole accounts.
    return UserFactory(
        username=f"{name}-{secrets.token_hex(3)}",
        created_at=timezone.now() - timedelta(days=age_days),
        email_verified_at=timezone.now() if verified else None,
        is_staff=staff,
    )


@pytest.fixture
def operator() -> User:
    return make_user("operator", verified=True, age_days=30, staff=True)


def test_the_lane_purges_only_week_old_unverified_password_signups():
    stale = make_user("stale", verified=False, age_days=8)
    young = make_user("young", verified=False, age_days=6)
    verified = make_user("verified", verified=True, age_days=30)
    social = make_user("social", verified=False, age_days=30)
    OAuthConnectionFactory(user=social, provider_name="github")
    run_lane("unverified_account_purge")
    assert not User.objects.filter(pk=stale.pk).exists()
    assert set(User.objects.values_list("pk", flat=True)) >= {young.pk, verified.pk, social.pk}
    actions = set(AuditEvent.objects.using("audit").values_list("action", flat=True))
    assert "unverified_account_purged" in actions


def test_dry_run_lists_without_deleting_and_needs_an_operator(operator):
    stale = make_user("stale", verified=False, age_days=9)
    answer = invoke("adminUnverifiedAccountPurgeRun", Context(user=operator), {"dryRun": True})
    assert answer["outcomes"] == [
        {"userId": stale.stable_user_id, "outcome": "would_purge", "reason": ""}
    ]
    assert User.objects.filter(pk=stale.pk).exists()
    nobody = make_user("nobody", verified=True, age_days=1)
    with pytest.raises(KodyError) as caught:
        invoke("adminUnverifiedAccountPurgeRun", Context(user=nobody), {"dryRun": True})
    assert caught.value.status in (403, 404)


def test_an_account_verified_after_selection_is_not_claimed():
    from apps.accounts.deletion import unverified

    stale = make_user("stale", verified=False, age_days=9)
    User.objects.filter(pk=stale.pk).update(email_verified_at=timezone.now())
    assert unverified.claim(stale) is False
    assert User.objects.get(pk=stale.pk).deleting_at is None


def test_lease_repair_is_audit_first_and_idempotent(operator):
    owner = make_user("owner", verified=True, age_days=30)
    UserMeter.call(
        owner.stable_user_id,
        "acquire_write_lease",
        token="stuck-1",
        holder="job-run",
        at=timezone.now().isoformat(),
    )
    ctx = Context(user=operator)
    listed = invoke("adminAccountWriteLeaseList", ctx, {"userId": owner.stable_user_id})
    assert [(lease["token"], lease["holder"]) for lease in listed["leases"]] == [
        ("stuck-1", "job-run")
    ]
    args = {"userId": owner.stable_user_id, "token": "stuck-1", "reason": "worker died"}
    first = invoke("adminAccountWriteLeaseRepair", ctx, args)
    assert first["finalized"] is True
    repair = AccountWriteLeaseRepair.objects.get()
    assert (repair.lease_holder, repair.repaired_by_user_id) == ("job-run", operator.stable_user_id)
    assert UserMeter.call(owner.stable_user_id, "list_write_leases") == []
    again = invoke("adminAccountWriteLeaseRepair", ctx, args)  # a retry after a partial run
    assert again["finalized"] is False and AccountWriteLeaseRepair.objects.count() == 1


def test_an_interrupted_repair_finishes_on_retry(operator, monkeypatch):
    owner = make_user("owner", verified=True, age_days=30)
    UserMeter.call(
        owner.stable_user_id,
        "acquire_write_lease",
        token="stuck-2",
        holder="app",
        at=timezone.now().isoformat(),
    )
    real = UserMeter.call

    def die_on_finalize(user_id, method, *a, **kw):  # type: ignore[no-untyped-def]
        if method == "finalize_lease_repair":
            raise RuntimeError("crashed after the audit row")
        return real(user_id, method, *a, **kw)

    monkeypatch.setattr(UserMeter, "call", die_on_finalize)
    args = {"userId": owner.stable_user_id, "token": "stuck-2", "reason": "stuck"}
    with pytest.raises(Exception):  # noqa: B017 - the crash itself
        invoke("adminAccountWriteLeaseRepair", Context(user=operator), args)
    assert AccountWriteLeaseRepair.objects.count() == 1  # audited before anything was dropped
    assert len(real(owner.stable_user_id, "list_write_leases")) == 1
    monkeypatch.setattr(UserMeter, "call", real)
    assert invoke("adminAccountWriteLeaseRepair", Context(user=operator), args)["finalized"]
    assert real(owner.stable_user_id, "list_write_leases") == []


def test_a_user_cannot_repair_or_list_anyones_leases():
    owner = make_user("owner", verified=True, age_days=30)
    other = make_user("other", verified=True, age_days=30)
    for name, args in (
        ("adminAccountWriteLeaseList", {"userId": owner.stable_user_id}),
        (
            "adminAccountWriteLeaseRepair",
            {"userId": owner.stable_user_id, "token": "x", "reason": "y"},
        ),
    ):
        with pytest.raises((Forbidden, KodyError)) as caught:
            invoke(name, Context(user=other), args)
        assert caught.value.status in (403, 404)
