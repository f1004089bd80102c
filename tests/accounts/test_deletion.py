"""Account deletion: inventory-driven, fail-closed, resumable (manage.py purge_account)."""

from __future__ import annotations

import io
import secrets
from datetime import timedelta

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from apps.accounts.deletion import job
from apps.accounts.models import AccountDeletion, DeletionStatus, User
from apps.accounts.services import tokens
from apps.entitlements.actor import UserMeter
from apps.packages.models import ValueEntry
from config.buckets import bucket_storages
from kody import blobs
from kody.actors import ActorUnavailable
from kody.blobs.keys import email_raw_key
from kody.errors import AccountDeleting
from kody.kv import store
from kody.lanes import control
from kody.lanes.models import LaneControl
from kody.userschema.naming import schema_name_for
from tests.accounts.factories import PASSWORD, ReferralFactory, UserFactory
from tests.clock import today_iso
from tests.packages.factories import ValueBucketFactory, ValueEntryFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


@pytest.fixture(autouse=True)
def fs_buckets(tmp_path):  # type: ignore[no-untyped-def]
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


def make_user(name: str) -> User:
    # Not the shared cast: the purge is checked by scanning every text column for the person's
    # username, and a run-unique name ("owner-3fa9c1") can appear nowhere else by accident.
    return UserFactory(username=f"{name}-{secrets.token_hex(3)}")


def populate(user: User, label: str) -> None:
    """Data in every surface that exists today."""
    bucket = ValueBucketFactory(id=secrets.token_hex(8), user_id=user.stable_user_id)
    for n in range(3):
        ValueEntryFactory(bucket=bucket, name=f"{label}-{n}", value=f"{label} {n}")
    tokens.create_token(user, name=f"{label}-token")
    UserMeter.call(
        user.stable_user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=9
    )
    key = email_raw_key(user.stable_user_id, f"{label}-m1")
    blobs.bucket("email_blobs").save(key, ContentFile(b"raw mime of " + label.encode()))
    store.put(f"package-retriever-manifest:v1:{user.stable_user_id}:x", b"derived")


@pytest.fixture
def owner() -> User:
    user = make_user("owner")
    populate(user, "mine")
    return user


@pytest.fixture
def outsider() -> User:
    user = make_user("outsider")
    populate(user, "theirs")
    return user


def purge(email: str) -> str:
    out = io.StringIO()
    call_command("purge_account", email, "--yes", stdout=out)
    return out.getvalue()


def text_columns() -> list[tuple[str, str]]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = 'public' AND data_type IN"
            " ('text', 'character varying', 'jsonb', 'json')"
        )
        return cursor.fetchall()


def traces_of(*needles: str) -> list[str]:
    """Every public text/JSON column holding any needle: what is left of a person."""
    found = []
    with connection.cursor() as cursor:
        for table, column in text_columns():
            for needle in needles:
                cursor.execute(
                    f'SELECT COUNT(*) FROM "{table}" WHERE "{column}"::text LIKE %s',
                    [f"%{needle}%"],
                )
                if cursor.fetchone()[0]:
                    found.append(f"{table}.{column}")
    return found


def stop(*args: object) -> None:
    raise RuntimeError("stop")


def schema_exists(user_id: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema_name_for(user_id)])
        return cursor.fetchone() is not None


def test_purge_removes_everything_of_the_owner_and_nothing_of_anyone_else(owner, outsider):
    ReferralFactory(referrer=outsider, referee=owner)
    stable, email, username = owner.stable_user_id, owner.email, owner.username
    before = traces_of(stable, email, username)
    assert {
        "users.stable_user_id",
        "value_buckets.user_id",
        "referrals.referee_stable_user_id",
    } <= set(before)
    printed = purge(email)
    assert "[1/6] mark" in printed and "[5/6] database" in printed
    assert f"deleted {email}: complete" in printed
    assert traces_of(stable, email, username) == []
    assert not schema_exists(stable)
    assert list(blobs.list_prefix("email_blobs", f"email-raw:v1:{stable}/")) == []
    assert store.get(f"package-retriever-manifest:v1:{stable}:x") is None
    # The other person is untouched.
    assert ValueEntry.objects.filter(bucket__user_id=outsider.stable_user_id).count() == 3
    assert schema_exists(outsider.stable_user_id)
    assert list(blobs.list_prefix("email_blobs", f"email-raw:v1:{outsider.stable_user_id}/"))
    assert store.get(f"package-retriever-manifest:v1:{outsider.stable_user_id}:x") == b"derived"
    reading = UserMeter.call(
        outsider.stable_user_id, "read", resource="execute_calls_per_day", day=today_iso()
    )
    assert reading["count"] == 1
    # The deletion's own record forgot who it was about.
    record = AccountDeletion.objects.get()
    assert record.status == DeletionStatus.COMPLETE and record.subject_user_id is None


def test_an_operators_lane_pause_outlives_them_but_their_id_does_not(owner, outsider):
    LaneControl.objects.bulk_create(
        [LaneControl(name="test_by_owner"), LaneControl(name="test_by_other")]
    )
    control.pause(["test_by_owner"], by=owner.stable_user_id, reason="noisy")
    control.pause(["test_by_other"], by=outsider.stable_user_id)
    purge(owner.email)
    mine, theirs = (
        LaneControl.objects.get(name="test_by_owner"),
        LaneControl.objects.get(name="test_by_other"),
    )
    assert (mine.paused, mine.paused_by_user_id, mine.pause_reason) == (True, None, "noisy")
    assert (theirs.paused, theirs.paused_by_user_id) == (True, outsider.stable_user_id)


def test_the_same_email_can_sign_up_again_after_deletion(owner):
    email = owner.email
    purge(email)
    again = UserFactory(username="again-" + secrets.token_hex(3), email=email)
    assert again.pk != owner.pk
    # The kernel's tombstone was cleared at the end: the same stable id gets a fresh schema.
    charge = UserMeter.call(
        again.stable_user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=5
    )
    assert charge["count"] == 1


def test_a_call_after_the_schema_purge_does_not_resurrect_it(owner, monkeypatch):
    monkeypatch.setitem(job.STEP_FUNCTIONS, "database", stop)
    with pytest.raises(CommandError):
        purge(owner.email)
    assert not schema_exists(owner.stable_user_id)
    with pytest.raises(AccountDeleting):  # e.g. a call that was queued before the purge
        UserMeter.call(
            owner.stable_user_id,
            "consume",
            resource="execute_calls_per_day",
            day=today_iso(),
            limit=5,
        )
    assert not schema_exists(owner.stable_user_id)


def test_purge_needs_yes_and_a_known_email(owner):
    with pytest.raises(CommandError, match="--yes"):
        call_command("purge_account", owner.email)
    with pytest.raises(CommandError, match="no account"):
        call_command("purge_account", "nobody@example.com", "--yes")
    assert User.objects.filter(pk=owner.pk).exists()


def assert_retained(user: User, step: str) -> None:
    assert User.objects.get(pk=user.pk).deleting_at is not None
    assert ValueEntry.objects.filter(bucket__user_id=user.stable_user_id).count() == 3
    deletion = AccountDeletion.objects.get(subject_user_id=user.stable_user_id)
    assert deletion.status == DeletionStatus.RETAINED and deletion.step == step


def test_a_blob_store_outage_keeps_the_account_and_a_rerun_completes(owner, monkeypatch):
    real = blobs.purge_prefix

    def down(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("blob store unreachable")

    monkeypatch.setattr(blobs, "purge_prefix", down)
    with pytest.raises(CommandError, match="retained at step out_of_band"):
        purge(owner.email)
    assert_retained(owner, "out_of_band")
    monkeypatch.setattr(blobs, "purge_prefix", real)
    assert "complete" in purge(owner.email)
    assert not User.objects.filter(pk=owner.pk).exists()


def test_a_missing_meter_fails_closed(owner, monkeypatch):
    def unavailable(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise ActorUnavailable()

    monkeypatch.setattr(UserMeter, "call", unavailable)
    with pytest.raises(CommandError, match="retained at step mark: actor_unavailable"):
        purge(owner.email)
    assert ValueEntry.objects.filter(bucket__user_id=owner.stable_user_id).count() == 3


def test_a_crash_inside_the_database_step_deletes_nothing(owner, monkeypatch):
    real = job._apply

    def crash_on_users(cursor, target, who, report):  # type: ignore[no-untyped-def]
        if target.table == "users":
            raise RuntimeError("worker killed")
        real(cursor, target, who, report)

    monkeypatch.setattr(job, "_apply", crash_on_users)
    with pytest.raises(CommandError, match="retained at step database: RuntimeError"):
        purge(owner.email)
    # One transaction: the earlier tables' deletes rolled back with it.
    assert_retained(owner, "database")
    monkeypatch.setattr(job, "_apply", real)
    purge(owner.email)
    assert traces_of(owner.stable_user_id) == []


def test_a_write_lease_held_past_the_bound_stops_the_deletion_before_any_data_goes(owner):
    UserMeter.call(
        owner.stable_user_id,
        "acquire_write_lease",
        token="t-1",
        holder="package-run",
        at=timezone.now().isoformat(),
    )
    with pytest.raises(CommandError, match="write lease.*package-run"):
        purge(owner.email)
    assert_retained(owner, "drain")
    UserMeter.call(owner.stable_user_id, "release_write_lease", token="t-1")
    purge(owner.email)
    assert not User.objects.filter(pk=owner.pk).exists()


def test_no_write_lease_is_granted_once_the_account_is_marked(owner, monkeypatch):
    monkeypatch.setitem(job.STEP_FUNCTIONS, "drain", stop)
    with pytest.raises(CommandError):
        purge(owner.email)
    with pytest.raises(AccountDeleting):
        UserMeter.call(
            owner.stable_user_id,
            "acquire_write_lease",
            token="late",
            holder="racer",
            at=timezone.now().isoformat(),
        )


def test_a_retained_deletion_can_be_released_and_the_account_works_again(owner, monkeypatch):
    monkeypatch.setitem(job.STEP_FUNCTIONS, "drain", stop)
    with pytest.raises(CommandError):
        purge(owner.email)
    job.release(AccountDeletion.objects.get(subject_user_id=owner.stable_user_id))
    assert User.objects.get(pk=owner.pk).deleting_at is None
    granted = UserMeter.call(
        owner.stable_user_id,
        "acquire_write_lease",
        token="after",
        holder="app",
        at=timezone.now().isoformat(),
    )
    assert granted["held"] is True


def test_the_resume_lane_finishes_a_retained_deletion_once_it_is_due(owner, monkeypatch):
    from kody.lanes import run_lane

    def stripe_down(*args):  # type: ignore[no-untyped-def]
        raise RuntimeError("stripe down")

    monkeypatch.setitem(job.STEP_FUNCTIONS, "billing", stripe_down)
    with pytest.raises(CommandError, match="retained at step billing"):
        purge(owner.email)
    monkeypatch.setitem(job.STEP_FUNCTIONS, "billing", job._billing)
    run_lane("account_deletion_resume")
    assert User.objects.filter(pk=owner.pk).exists()  # not due yet: backoff
    AccountDeletion.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))
    run_lane("account_deletion_resume")
    assert not User.objects.filter(pk=owner.pk).exists()
    assert AccountDeletion.objects.get().status == DeletionStatus.COMPLETE


def test_a_person_deletes_their_own_account_after_re_entering_the_password(client, owner, outsider):
    client.force_login(owner)
    assert "Delete your account" in client.get("/account/delete").content.decode()
    wrong = client.post("/account/delete", {"password": "nope", "confirm": "on"})
    assert wrong.status_code == 400 and User.objects.filter(pk=owner.pk).exists()
    unconfirmed = client.post("/account/delete", {"password": PASSWORD})
    assert unconfirmed.status_code == 400 and User.objects.filter(pk=owner.pk).exists()
    done = client.post("/account/delete", {"password": PASSWORD, "confirm": "on"})
    assert done.status_code == 200 and "Your account is deleted" in done.content.decode()
    assert not User.objects.filter(pk=owner.pk).exists()
    assert ValueEntry.objects.filter(bucket__user_id=outsider.stable_user_id).count() == 3
    assert client.get("/account").status_code == 302  # signed out


def test_the_delete_page_shows_the_refund(client, owner, settings, frozen_clock):
    from tests.entitlements.stripe_fake import StripeFake

    fake = StripeFake()
    settings.STRIPE_API_BASE = fake.start()
    settings.STRIPE_SECRET_KEY = "sk_test_fake"
    try:
        customer = fake.add_customer()["id"]
        User.objects.filter(pk=owner.pk).update(stripe_customer_id=customer)
        subscription = fake.add_subscription(customer, "kody_pro_month")
        now = int(timezone.now().timestamp())
        day = 86_400
        # 3000 over thirty days, ten days left → ⌊3000 × 10/30⌋ = 1000 = 10.00 USD
        fake.add_invoice(
            subscription,
            [{"amount": 3000, "period": {"start": now - 20 * day, "end": now + 10 * day}}],
        )
        client.force_login(owner)
        done = client.post("/account/delete", {"password": PASSWORD, "confirm": "on"})
        page = done.content.decode()
        assert done.status_code == 200 and "10.00 USD" in page, page
        assert fake.subscriptions[subscription["id"]]["status"] == "canceled"
    finally:
        fake.stop()


def test_a_failing_vector_delete_keeps_the_account_and_a_rerun_completes(owner, monkeypatch):
    from kody.vectors import index

    real = index.delete_all_for_user

    def failing(user_id: str) -> int:
        raise RuntimeError("vector index unavailable")

    monkeypatch.setattr(index, "delete_all_for_user", failing)
    with pytest.raises(CommandError, match="retained at step out_of_band: RuntimeError"):
        purge(owner.email)
    assert_retained(owner, "out_of_band")
    monkeypatch.setattr(index, "delete_all_for_user", real)
    assert "complete" in purge(owner.email)


def test_stripe_rejecting_keeps_the_account_and_its_subscription(owner, settings):
    from tests.entitlements.stripe_fake import StripeFake

    fake = StripeFake()
    settings.STRIPE_API_BASE = fake.start()
    settings.STRIPE_SECRET_KEY = "sk_test_fake"
    try:
        customer = fake.add_customer()["id"]
        User.objects.filter(pk=owner.pk).update(stripe_customer_id=customer)
        subscription = fake.add_subscription(customer, "kody_pro_month")
        now = int(timezone.now().timestamp())
        fake.add_invoice(
            subscription,
            [{"amount": 3000, "period": {"start": now - 86_400, "end": now + 29 * 86_400}}],
        )
        fake.reject_credit_notes = "credit amount exceeds what can be credited"
        with pytest.raises(CommandError, match="retained at step billing: billing_settlement"):
            purge(owner.email)
        assert_retained(owner, "billing")
        assert fake.subscriptions[subscription["id"]]["status"] == "active"
        fake.reject_credit_notes = ""
        assert "complete" in purge(owner.email)
        assert fake.subscriptions[subscription["id"]]["status"] == "canceled"
    finally:
        fake.stop()


def test_purge_removes_every_repo_of_the_owner_objects_refs_kv_and_icons(owner, outsider):
    from apps.packages.models import EntitySource, SourceRepoRef
    from apps.packages.services import packages, repos
    from apps.packages.services.git import Author, commit_files, move_refs
    from kody.blobs.keys import identity_icon_key
    from tests.packages.test_packages import files

    def stock(user: User) -> list[EntitySource]:
        packages.save(user, files(username=user.username))
        _repo, plain = repos.create(user.stable_user_id, "notes")
        sha = commit_files(
            plain.repo_id, {"a.txt": b"a"}, parent=None, message="m", author=Author("a", "a@b")
        )
        move_refs(plain.repo_id, [("refs/heads/main", None, sha)])
        icon = identity_icon_key(plain.repo_id, sha)
        blobs.bucket("community_assets").save(icon, ContentFile(b"webp"))
        return list(EntitySource.objects.filter(user_id=user.stable_user_id))

    mine, theirs = stock(owner), stock(outsider)
    assert len(mine) == 2
    purge(owner.email)

    for source in mine:
        assert list(blobs.list_prefix("source_repos", f"{source.repo_id}/")) == []
        assert (
            list(blobs.list_prefix("community_assets", f"identity-icon:v1/{source.repo_id}/")) == []
        )
        assert not SourceRepoRef.objects.filter(repo_id=source.repo_id).exists()
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM kody_kv WHERE key LIKE %s", [f"%{source.id}%"])
            assert cursor.fetchone()[0] == 0
    assert not EntitySource.objects.filter(user_id=owner.stable_user_id).exists()
    for source in theirs:  # the other person's repos are whole
        assert list(blobs.list_prefix("source_repos", f"{source.repo_id}/pack/"))
        assert SourceRepoRef.objects.filter(repo_id=source.repo_id).exists()
    assert EntitySource.objects.filter(user_id=outsider.stable_user_id).count() == 2
