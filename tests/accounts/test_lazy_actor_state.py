"""Export and deletion of a user whose actors never ran: tables only where used (issue 16)."""

from __future__ import annotations

import io

import pytest
from django.conf import settings as django_settings
from django.core.management import call_command
from django.db import connection
from django.test import override_settings

from apps.accounts.export import service
from apps.entitlements.actor import UserMeter
from apps.mailbox.actor import Mailbox
from config.buckets import bucket_storages
from kody.userschema.models import SchemaArchive
from kody.userschema.naming import schema_name_for
from kody.userschema.schemas import has_actor_state
from tests.clock import today_iso

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


@pytest.fixture(autouse=True)
def _fresh_schemas() -> None:  # type: ignore[no-untyped-def]
    # The cast's stable ids repeat from test to test while the flush empties the registry:
    # start each test without their schemas or this process's memory of them.
    from tests.schemas import drop_user_schemas

    drop_user_schemas()


@pytest.fixture(autouse=True)
def fs_buckets(tmp_path):  # type: ignore[no-untyped-def]
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


def _meter(user_id: str) -> None:
    UserMeter.call(user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=9)


def _has_table(user_id: str, table: str) -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s)", [f"{schema_name_for(user_id)}.{table}"])
        return cursor.fetchone()[0] is not None


def test_export_of_a_user_who_never_got_mail_creates_no_mail_tables(owner, outsider):
    _meter(owner.stable_user_id)
    _meter(outsider.stable_user_id)
    Mailbox.call(outsider.stable_user_id, "count")  # the outsider's mailbox exists
    page = service.section(owner, "mailbox")
    assert page["page"] == {} and page["nextCursor"] is None
    assert not _has_table(owner.stable_user_id, "email_messages")
    assert not has_actor_state(owner.stable_user_id, Mailbox.name)
    # The meter, every user's, still pages through its actor.
    assert service.section(owner, "user_meter")["page"]["counters"]
    # The outsider's own mailbox section comes from their actor, and shows nothing of ours.
    theirs = service.section(outsider, "mailbox")["page"]
    assert theirs and theirs != {}


def test_deletion_of_a_user_who_never_got_mail_skips_the_mailbox_and_completes(owner, outsider):
    _meter(owner.stable_user_id)
    Mailbox.call(outsider.stable_user_id, "count")
    out = io.StringIO()
    call_command("purge_account", owner.email, "--yes", stdout=out)
    assert f"deleted {owner.email}: complete" in out.getvalue()
    assert not _has_table(owner.stable_user_id, "email_messages")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT 1 FROM pg_namespace WHERE nspname = %s", [schema_name_for(owner.stable_user_id)]
        )
        assert cursor.fetchone() is None
    # The outsider keeps their mailbox.
    assert _has_table(outsider.stable_user_id, "email_messages")


def _hibernate(user_id: str) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from kody.userschema.models import UserSchema

    then = timezone.now() - timedelta(days=40)
    UserSchema.objects.filter(user_id=user_id).update(active_on=then.date(), created_at=then)
    out = io.StringIO()
    call_command("hibernate_schemas", "--idle-days", "30", stdout=out)
    assert SchemaArchive.objects.filter(user_id=user_id).exists(), out.getvalue()


def test_export_of_a_hibernated_user_reads_their_state(owner, outsider):
    _meter(owner.stable_user_id)
    _meter(outsider.stable_user_id)
    _hibernate(owner.stable_user_id)
    counters = service.section(owner, "user_meter")["page"]["counters"]
    assert [c["count"] for c in counters] == [1]
    assert not SchemaArchive.objects.filter(user_id=owner.stable_user_id).exists()  # restored
    assert service.section(outsider, "user_meter")["page"]["counters"] != []


def test_deletion_of_a_hibernated_user_deletes_the_archive(owner, outsider):
    _meter(owner.stable_user_id)
    _meter(outsider.stable_user_id)
    _hibernate(owner.stable_user_id)
    out = io.StringIO()
    call_command("purge_account", owner.email, "--yes", stdout=out)
    assert f"deleted {owner.email}: complete" in out.getvalue()
    assert not SchemaArchive.objects.filter(user_id=owner.stable_user_id).exists()
    assert not _has_table(owner.stable_user_id, "actor_owner")
    assert _has_table(outsider.stable_user_id, "actor_owner")
