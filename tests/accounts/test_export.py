"""Account export: manifest, keyset-paged sections, blob chunks, the command — and isolation."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
from datetime import UTC, datetime

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import override_settings

from apps.accounts.export import service
from apps.accounts.export.blob_pages import ObjectChanged
from apps.accounts.export.cursors import InvalidCursor
from apps.accounts.models import AccessToken, User
from apps.accounts.services import tokens
from apps.entitlements.actor import UserMeter
from apps.packages.models import ValueBucket, ValueEntry
from config.buckets import bucket_storages
from kody import blobs
from kody.blobs.keys import email_raw_key
from tests.accounts.factories import ReferralFactory, UserFactory
from tests.clock import today_iso
from tests.packages.factories import ValueBucketFactory, ValueEntryFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True


@pytest.fixture(autouse=True)
def fs_buckets(tmp_path):  # type: ignore[no-untyped-def]
    conf = bucket_storages(use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path)
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield tmp_path


def make_user(name: str) -> User:
    # Not the shared cast: these tests commit (transaction=True) and per-user schemas outlive the
    # flush between tests, so each person gets a stable id no earlier test has used.
    return UserFactory(username=f"{name}-{secrets.token_hex(3)}")


def give_values(user: User, count: int, label: str) -> ValueBucket:
    bucket = ValueBucketFactory(id=secrets.token_hex(8), user_id=user.stable_user_id)
    for n in range(count):
        ValueEntryFactory(bucket=bucket, name=f"{label}-{n}", value=f"{label} value {n}")
    return bucket


def all_rows(user: User, table: str, limit: int) -> list[dict]:
    rows, cursor, pages = [], None, 0
    while True:
        page = service.section(user, "d1_table", table=table, cursor=cursor, limit=limit)
        rows += page["rows"]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            return rows
        assert pages < 100


@pytest.fixture
def owner() -> User:
    return make_user("owner")


@pytest.fixture
def outsider() -> User:
    return make_user("outsider")


def test_manifest_counts_the_owners_rows_and_says_what_is_left_out(owner, outsider):
    give_values(owner, 3, "mine")
    give_values(outsider, 5, "theirs")
    tokens.create_token(owner, name="laptop")
    manifest = service.manifest(owner)
    counts = {s["table"]: s["count"] for s in manifest["sections"] if s["section"] == "d1_table"}
    assert counts["value_entries"] == 3 and counts["value_buckets"] == 1
    assert counts["access_tokens"] == 1 and counts["users"] == 1
    assert manifest["schemaVersion"] == 1 and manifest["userId"] == owner.stable_user_id
    assert manifest["security"] == {"secretValuesExported": False}
    assert manifest["redactedColumns"]["access_tokens"] == ["token_hash"]
    assert manifest["redactedColumns"]["users"] == ["password_hash"]
    excluded = {e["table"] for e in manifest["excludedD1Surfaces"]}
    assert {"system_email_messages", "usage_events"} <= excluded
    assert "user_meter" in {s["section"] for s in manifest["sections"]}


def test_table_sections_page_by_key_and_hold_only_the_owners_rows(owner, outsider):
    give_values(owner, 7, "mine")
    give_values(outsider, 4, "theirs")
    rows = all_rows(owner, "value_entries", limit=3)
    assert sorted(r["name"] for r in rows) == [f"mine-{n}" for n in range(7)]
    assert [r["name"] for r in all_rows(outsider, "value_entries", limit=2)] == [
        f"theirs-{n}" for n in range(4)
    ]


def test_times_leave_with_every_microsecond(owner):
    # Django's JSON encoder cuts times to milliseconds: .000500 would come back as .000000 and
    # an imported account would not match its export.
    bucket = give_values(owner, 1, "precise")
    when = datetime(2026, 3, 1, 12, 0, 0, 500, tzinfo=UTC)
    ValueEntry.objects.filter(bucket=bucket).update(created_at=when, updated_at=when)
    [row] = all_rows(owner, "value_entries", limit=5)
    assert row["created_at"] == row["updated_at"] == "2026-03-01T12:00:00.000500Z"


def test_credential_columns_never_leave(owner):
    tokens.create_token(owner, name="laptop")
    assert AccessToken.objects.filter(user=owner).exclude(token_hash="").exists()
    [token] = all_rows(owner, "access_tokens", limit=10)
    assert "token_hash" not in token and token["name"] == "laptop"
    [me] = all_rows(owner, "users", limit=10)
    assert "password_hash" not in me and owner.password not in json.dumps(me)


def test_the_other_party_of_a_shared_row_is_masked(owner, outsider):
    ReferralFactory(referrer=owner, referee=outsider)
    [mine] = all_rows(owner, "referrals", limit=10)
    assert mine["referrer_stable_user_id"] == owner.stable_user_id
    assert mine["referee_stable_user_id"] == "[redacted]"
    [theirs] = all_rows(outsider, "referrals", limit=10)
    assert theirs["referrer_stable_user_id"] == "[redacted]"


def test_a_cursor_is_bound_to_its_user_and_section(owner, outsider):
    give_values(owner, 3, "mine")
    page = service.section(owner, "d1_table", table="value_entries", limit=1)
    with pytest.raises(InvalidCursor):
        service.section(outsider, "d1_table", table="value_entries", cursor=page["nextCursor"])
    with pytest.raises(InvalidCursor):
        service.section(owner, "d1_table", table="value_buckets", cursor=page["nextCursor"])
    with pytest.raises(InvalidCursor):
        service.section(owner, "d1_table", table="value_entries", cursor=page["nextCursor"] + "x")


def test_unknown_sections_and_tables_are_not_found(owner):
    with pytest.raises(Exception) as caught:
        service.section(owner, "d1_table", table="system_email_messages")
    assert getattr(caught.value, "status", None) == 404
    with pytest.raises(Exception) as caught:
        service.section(owner, "no_such_section")
    assert getattr(caught.value, "status", None) == 404


def test_the_meter_section_pages_through_the_actor(owner, outsider):
    UserMeter.call(
        owner.stable_user_id, "consume", resource="execute_calls_per_day", day=today_iso(), limit=9
    )
    page = service.section(owner, "user_meter")
    assert page["actor"] == "entitlements.UserMeter"
    assert [c["resource"] for c in page["page"]["counters"]] == ["execute_calls_per_day"]
    assert service.section(outsider, "user_meter")["page"]["counters"] == []


def store_raw(user: User, message_id: str, data: bytes) -> str:
    key = email_raw_key(user.stable_user_id, message_id)
    blobs.bucket("email_blobs").save(key, ContentFile(data))
    return key


def test_blobs_come_back_byte_exact_in_256_kib_chunks_and_only_the_owners(owner, outsider):
    data = os.urandom(600 * 1024)
    store_raw(owner, "m1", data)
    store_raw(outsider, "m2", b"not yours")
    chunks, cursor = [], None
    while True:
        page = service.section(owner, "r2_object", cursor=cursor)
        if page["object"] is not None:
            chunks.append(page["object"])
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert [len(base64.b64decode(c["chunk"])) for c in chunks] == [262144, 262144, 90112]
    assert b"".join(base64.b64decode(c["chunk"]) for c in chunks) == data
    assert {c["key"] for c in chunks} == {email_raw_key(owner.stable_user_id, "m1")}


def test_an_object_that_changes_between_pages_is_reported_not_mixed(owner):
    key = store_raw(owner, "m1", os.urandom(300 * 1024))
    first = service.section(owner, "r2_object")
    storage = blobs.bucket("email_blobs")
    storage.delete(key)
    storage.save(key, ContentFile(os.urandom(400 * 1024)))
    with pytest.raises(ObjectChanged):
        service.section(owner, "r2_object", cursor=first["nextCursor"])


def test_export_account_writes_a_complete_checksummed_directory(owner, outsider, tmp_path):
    give_values(owner, 2, "mine")
    give_values(outsider, 2, "theirs")
    data = os.urandom(300 * 1024)
    key = store_raw(owner, "m1", data)
    out = tmp_path / "export"
    call_command("export_account", owner.email, "--out", str(out), "--no-progress")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["userId"] == owner.stable_user_id
    entries = [json.loads(line) for line in (out / "sections/d1_table.value_entries.jsonl").open()]
    assert sorted(e["name"] for e in entries) == ["mine-0", "mine-1"]
    assert (out / "blobs" / "email_blobs" / key).read_bytes() == data
    for line in (out / "SHA256SUMS").read_text().splitlines():
        digest, name = line.split("  ", 1)
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    text = "".join(p.read_text() for p in (out / "sections").iterdir())
    assert outsider.stable_user_id not in text and "theirs" not in text


def test_export_account_refuses_a_non_empty_directory_and_an_unknown_email(owner, tmp_path):
    (tmp_path / "x").write_text("taken")
    with pytest.raises(CommandError, match="not empty"):
        call_command("export_account", owner.email, "--out", str(tmp_path))
    with pytest.raises(CommandError, match="no account"):
        call_command("export_account", "nobody@example.com", "--out", str(tmp_path / "new"))


def test_the_manifest_page_needs_a_login_and_shows_only_ones_own(client, owner, outsider):
    give_values(outsider, 3, "theirs")
    assert client.get("/account/export.json").status_code == 302
    client.force_login(owner)
    response = client.get("/account/export.json")
    assert response.status_code == 200
    body = response.json()
    assert body["userId"] == owner.stable_user_id
    counts = {s["table"]: s["count"] for s in body["sections"] if s["section"] == "d1_table"}
    assert counts["value_entries"] == 0


def test_the_capabilities_serve_the_same_pages_over_the_api(client, owner, outsider):
    give_values(owner, 2, "mine")
    _, secret = tokens.create_token(owner, name="agent")
    auth = {"HTTP_AUTHORIZATION": f"Bearer {secret}"}
    manifest = client.post(
        "/api/v1/capabilities/accountExportManifest", content_type="application/json", **auth
    )
    assert manifest.status_code == 200, manifest.content
    assert manifest.json()["userId"] == owner.stable_user_id
    assert client.get("/api/v1/account/export", **auth).json()["userId"] == owner.stable_user_id
    page = client.post(
        "/api/v1/capabilities/accountExportSection",
        data={"section": "d1_table", "table": "value_entries", "limit": 1},
        content_type="application/json",
        **auth,
    )
    assert page.status_code == 200, page.content
    body = page.json()
    assert len(body["rows"]) == 1 and body["nextCursor"]
    _, other = tokens.create_token(outsider, name="agent")
    stolen = client.post(
        "/api/v1/capabilities/accountExportSection",
        data={"section": "d1_table", "table": "value_entries", "cursor": body["nextCursor"]},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {other}",
    )
    assert stolen.status_code == 400 and stolen.json()["error"]["code"] == "invalid_cursor"
