"""A hostile archive: Mallory exports her own account, edits the directory, and imports it as a
new account, aiming at Victor, who already lives here.

Each attack is one crafted archive. Every one must be refused with its reason, leave no
account behind, and leave Victor's rows, jobs, mail, blobs and KV keys byte-identical (his
own full export, taken before and after, is compared file by file).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import override_settings

from apps.accounts.management.commands.export_account import _write_checksums
from apps.accounts.models import SiteBannerDismissal, User
from apps.accounts.models.users import stable_user_id_for
from apps.jobs.models import Job
from apps.mailbox.actor import Mailbox
from apps.packages.models import McpMemory, PublishedBundleArtifact
from config.buckets import bucket_storages
from kody import blobs
from kody.blobs.keys import email_raw_key
from kody.kv import keys, store
from kody.userschema.naming import schema_name_for
from tests.accounts.factories import SiteBannerDismissalFactory, UserFactory
from tests.accounts.test_export_roundtrip import export, mail_and_storage, make_owner
from tests.packages.factories import (
    EntitySourceFactory,
    McpMemoryFactory,
    PublishedBundleArtifactFactory,
    ValueBucketFactory,
)

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _setup(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    settings.KODY_MAIL_DOMAIN = "mail.test"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    conf = bucket_storages(
        use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path / "var"
    )
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield


def bundle_key(source_id: str) -> str:
    return keys.bundle_artifact(source_id, "c1", "export", None, "index.ts")


@pytest.fixture
def victor() -> User:
    """The second user: memories, values, a job, delivered mail with its raw blob, KV keys."""
    user = UserFactory(username=f"victor-{secrets.token_hex(3)}")
    stable = user.stable_user_id
    McpMemoryFactory(id=secrets.token_hex(8), user_id=stable, summary="victor's secret plan")
    ValueBucketFactory(id=f"vb-{stable[:12]}", user_id=stable)
    mail_and_storage(user, "victor letter")
    source = EntitySourceFactory(
        id=f"src-{stable[:12]}", user_id=stable, entity_id="v-pkg", repo_id=f"repo-{stable[:12]}"
    )
    store.put(bundle_key(source.id), b"victor's bundle")
    return user


def victor_state(user: User, out: Path) -> dict[str, Any]:
    """Everything of Victor's: his export (rows, mail, storage, blobs) and his KV keys."""
    export(user.email, out)
    state: dict[str, Any] = {}
    for path in sorted(out.rglob("*")):
        if path.is_file() and path.name != "SHA256SUMS":
            state[path.relative_to(out).as_posix()] = path.read_bytes()
    manifest = json.loads(state.pop("manifest.json"))
    manifest.pop("generatedAt")
    state["manifest"] = manifest
    stable = user.stable_user_id
    for key in (
        bundle_key(f"src-{stable[:12]}"),
        f"package-retriever-manifest:v1:{stable}:x",
    ):
        state[f"kv:{key}"] = store.get(key)
    return state


@pytest.fixture
def archive(tmp_path) -> Path:
    """Mallory's honest export: mail, a job, a package source and its bundle row."""
    mallory = make_owner()
    stable = mallory.stable_user_id
    mail_and_storage(mallory, "mallory letter")
    source = EntitySourceFactory(
        id=f"src-{stable[:12]}", user_id=stable, entity_id="m-pkg", repo_id=f"repo-{stable[:12]}"
    )
    PublishedBundleArtifactFactory(
        id=f"pba-{stable[:12]}", user_id=stable, source_id=source.id, kv_key=bundle_key(source.id)
    )
    directory = export(mallory.email, tmp_path / "mallory")
    # The archive came from another instance: nothing of Mallory's is here.
    call_command("purge_account", mallory.email, "--yes", stdout=io.StringIO())
    return directory


NEW_EMAIL = "mallory-new@example.org"


def rows(directory: Path, table: str) -> list[dict[str, Any]]:
    path = directory / "sections" / f"d1_table.{table}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_rows(directory: Path, table: str, found: list[dict[str, Any]]) -> None:
    path = directory / "sections" / f"d1_table.{table}.jsonl"
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in found))


def attempt(directory: Path, *, reseal: bool = True) -> str:
    if reseal:
        _write_checksums(directory)  # a forger lists her edits, so checksums alone prove nothing
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_account",
            str(directory),
            "--email",
            NEW_EMAIL,
            "--no-reindex",
            stdout=io.StringIO(),
        )
    assert not User.objects.filter(email=NEW_EMAIL).exists()
    assert not User.objects.filter(stable_user_id=stable_user_id_for(NEW_EMAIL)).exists()
    return str(refused.value)


@pytest.fixture
def unharmed(victor, tmp_path):  # type: ignore[no-untyped-def]
    before = victor_state(victor, tmp_path / "victor-before")
    yield victor
    assert victor_state(victor, tmp_path / "victor-after") == before


def test_an_owner_column_naming_another_account_refuses_the_import(archive, unharmed):
    memories = rows(archive, "mcp_memories")
    memories.append({**memories[0], "id": "planted", "user_id": unharmed.stable_user_id})
    write_rows(archive, "mcp_memories", memories)

    reason = attempt(archive)

    assert "mcp_memories row does not belong to the exported account" in reason


def test_a_job_whose_caller_context_names_another_account_refuses_the_import(archive, unharmed):
    jobs = rows(archive, "jobs")
    jobs[0]["caller_context_json"] = {
        "userId": unharmed.stable_user_id,
        "surface": "mcp",
        "scopes": ["*"],
        "principal": "token:stolen",
    }
    write_rows(archive, "jobs", jobs)

    reason = attempt(archive)

    assert "jobs.caller_context_json names another account" in reason


def test_a_row_pointing_into_another_accounts_bucket_refuses_the_import(archive, unharmed):
    entries = rows(archive, "value_entries")
    entries[0]["bucket_id"] = f"vb-{unharmed.stable_user_id[:12]}"
    write_rows(archive, "value_entries", entries)

    reason = attempt(archive)

    assert "value_entries row's bucket_id points at a value_buckets row" in reason


@pytest.mark.parametrize("local", ["support", "victor"])
def test_a_reserved_or_someone_elses_sender_address_refuses_the_import(archive, unharmed, local):
    address = f"{unharmed.username if local == 'victor' else local}@mail.test"
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    write_rows(
        archive,
        "email_sender_identities",
        [
            {
                "id": "sender-1",
                "user_id": mallory_id,
                "email": address,
                "domain": "mail.test",
                "display_name": "Support",
                "status": "verified",
                "verified_at": "2026-01-01T00:00:00Z",
                "created_at": "2026-01-01T00:00:00Z",
                "updated_at": "2026-01-01T00:00:00Z",
            }
        ],
    )

    reason = attempt(archive)

    assert f"sender identity '{address}' is a reserved or platform address" in reason


def test_a_platform_id_as_the_exported_account_refuses_the_import(archive, unharmed):
    manifest_path = archive / "manifest.json"
    mallory_id = json.loads(manifest_path.read_text())["userId"]
    for path in [manifest_path, *(archive / "sections").glob("*.jsonl")]:
        path.write_text(path.read_text().replace(mallory_id, "system:email"))

    reason = attempt(archive)

    assert "manifest userId 'system:email' is not a stable user id" in reason


def test_a_kv_key_in_a_bundle_row_refuses_the_import(archive, unharmed):
    bundles = rows(archive, "published_bundle_artifacts")
    bundles[0]["kv_key"] = bundle_key(f"src-{unharmed.stable_user_id[:12]}")
    write_rows(archive, "published_bundle_artifacts", bundles)

    reason = attempt(archive)

    assert "kv_key is not the key its builder makes" in reason
    assert store.get(bundle_key(f"src-{unharmed.stable_user_id[:12]}")) == b"victor's bundle"


def test_a_push_subscription_to_another_accounts_repo_refuses_the_import(archive, unharmed):
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    source = rows(archive, "entity_sources")[0]
    write_rows(
        archive,
        "entity_source_artifacts_push_subscriptions",
        [
            {
                "source_id": source["id"],
                "user_id": mallory_id,
                "repo_id": f"repo-{unharmed.stable_user_id[:12]}",  # Victor's repo
                "subscription_id": "sub-1",
                "created_at": source["created_at"],
                "updated_at": source["updated_at"],
            }
        ],
    )

    reason = attempt(archive)

    assert "push subscription names a repo that is not its source's" in reason


def test_a_nul_character_in_a_row_refuses_the_import_before_any_write(archive, unharmed):
    memories = rows(archive, "mcp_memories")
    memories[0]["summary"] = "likes it\x00 strong"
    write_rows(archive, "mcp_memories", memories)

    reason = attempt(archive)

    assert "mcp_memories.summary holds a NUL character" in reason


def test_an_unlisted_file_refuses_the_import(archive, unharmed):
    _write_checksums(archive)
    planted = archive / "blobs" / "email_blobs" / f"email-raw:v1:{unharmed.stable_user_id}"
    planted.mkdir(parents=True)
    (planted / "evil").write_bytes(b"From: mallory\r\n\r\nnot from victor")

    reason = attempt(archive, reseal=False)

    assert "is not listed in SHA256SUMS" in reason


def test_a_path_leaving_the_archive_refuses_the_import(archive, unharmed, tmp_path):
    _write_checksums(archive)
    outside = tmp_path / "outside.jsonl"
    outside.write_text("{}\n")
    digest = hashlib.sha256(outside.read_bytes()).hexdigest()
    with open(archive / "SHA256SUMS", "a") as sums:
        sums.write(f"{digest}  sections/../../outside.jsonl\n")

    reason = attempt(archive, reseal=False)

    assert "names a path outside the export" in reason


def test_a_symlink_to_a_file_outside_refuses_the_import(archive, unharmed):
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    victims_mail = next(
        blobs.list_prefix("email_blobs", f"email-raw:v1:{unharmed.stable_user_id}/")
    )
    target = blobs.bucket("email_blobs").path(victims_mail)
    link = archive / "blobs" / "user_avatars" / mallory_id / "stolen.png"
    link.parent.mkdir(parents=True)
    os.symlink(target, link)

    reason = attempt(archive)  # the forger's SHA256SUMS even lists the link's target bytes

    assert f"blobs/user_avatars/{mallory_id}/stolen.png is a symlink" in reason
    assert list(blobs.list_prefix("user_avatars", "")) == []


def test_a_fifo_in_the_archive_refuses_the_import(archive, unharmed):
    # A FIFO (or a device) would block or read something that is not a file of the export.
    os.mkfifo(archive / "sections" / "pipe.jsonl")

    reason = attempt(archive, reseal=False)

    assert "sections/pipe.jsonl is not a regular file" in reason


def test_a_blob_key_that_exists_here_refuses_the_import_and_keeps_its_bytes(archive, unharmed):
    # Mallory's raw mail would land under the account's new id; someone's object is there.
    taken = email_raw_key(stable_user_id_for(NEW_EMAIL), "m1")
    blobs.bucket("email_blobs").save(taken, ContentFile(b"someone else's bytes"))

    reason = attempt(archive)

    assert f"blob email_blobs/{taken} already exists here" in reason
    assert blobs.bucket("email_blobs").open(taken).read() == b"someone else's bytes"


def test_an_honest_archive_lands_under_an_id_minted_here_with_keys_rebuilt(archive):
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    out = io.StringIO()

    call_command("import_account", str(archive), "--email", NEW_EMAIL, "--no-reindex", stdout=out)

    user = User.objects.get(email=NEW_EMAIL)
    new_id = user.stable_user_id
    assert new_id == stable_user_id_for(NEW_EMAIL) != mallory_id  # the archive chose nothing
    assert McpMemory.objects.get(user_id=new_id).summary == "likes it strong"
    assert not McpMemory.objects.filter(user_id=mallory_id).exists()
    job = Job.objects.get(user_id=new_id)
    assert not job.enabled and job.caller_context_json["scopes"] == []
    assert job.caller_context_json["userId"] == new_id and job.storage_id == f"job:{job.id}"
    assert "jobs: imported disabled and without a grant" in out.getvalue()
    bundle = PublishedBundleArtifact.objects.get(user_id=new_id)
    assert bundle.kv_key == bundle_key(bundle.source_id)
    raw = blobs.bucket("email_blobs").open(email_raw_key(new_id, "m1")).read()
    assert raw == bytes(range(256)) * 2000
    assert list(blobs.list_prefix("email_blobs", f"email-raw:v1:{mallory_id}/")) == []
    # The delivered message's raw MIME is found under the new account's key.
    references = Mailbox.call(new_id, "blob_references")["references"]
    assert references and all(new_id in ref["key"] for ref in references)
    for ref in references:
        assert blobs.bucket(ref["bucket"]).exists(ref["key"])


def test_an_archive_cannot_choose_an_id_that_shares_anothers_schema(archive, unharmed, tmp_path):
    # Schema names keep the first 60 hex characters of the id: an id differing from Victor's
    # only at the end would share his schema, so the archive's id is never the account's.
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    lookalike = unharmed.stable_user_id[:60] + "0000"
    for path in [archive / "manifest.json", *(archive / "sections").glob("*.jsonl")]:
        path.write_text(path.read_text().replace(mallory_id, lookalike))
    for path in sorted((archive / "blobs").rglob("*"), reverse=True):
        if mallory_id in path.name:
            path.rename(path.with_name(path.name.replace(mallory_id, lookalike)))
    _write_checksums(archive)

    call_command(
        "import_account", str(archive), "--email", NEW_EMAIL, "--no-reindex", stdout=io.StringIO()
    )

    imported = User.objects.get(email=NEW_EMAIL)
    assert schema_name_for(imported.stable_user_id) != schema_name_for(unharmed.stable_user_id)


def test_minting_skips_an_id_whose_schema_name_is_taken(victor, monkeypatch):
    from apps.accounts.services import identity_rules

    lookalike = victor.stable_user_id[:60] + "0000"
    monkeypatch.setattr(identity_rules, "stable_user_id_for", lambda email: lookalike)

    minted = identity_rules._mint_stable_user_id("someone@example.org")

    assert minted != lookalike
    assert schema_name_for(minted) != schema_name_for(victor.stable_user_id)


def test_resume_pours_nothing_into_an_account_that_was_not_imported(archive, unharmed):
    # The actor pages (mail, storage) of Mallory's archive, aimed at Victor's account.
    mallory_id = json.loads((archive / "manifest.json").read_text())["userId"]
    for path in [archive / "manifest.json", *(archive / "sections").glob("*.jsonl")]:
        path.write_text(path.read_text().replace(mallory_id, unharmed.stable_user_id))
    users = rows(archive, "users")
    users[0].update(email=unharmed.email, username=unharmed.username)
    write_rows(archive, "users", users)
    _write_checksums(archive)

    with pytest.raises(CommandError, match="no account here was imported from this export"):
        call_command(
            "import_account", str(archive), "--resume", "--no-reindex", stdout=io.StringIO()
        )


def test_a_banner_dismissal_of_the_old_instance_is_left_out_with_a_warning(tmp_path):
    # The banner was the old instance's announcement; this instance never had it.
    mallory = make_owner()
    dismissal = SiteBannerDismissalFactory(user=mallory)
    directory = export(mallory.email, tmp_path / "mallory")
    call_command("purge_account", mallory.email, "--yes", stdout=io.StringIO())
    assert rows(directory, "site_banner_dismissals")[0]["banner_id"] == str(dismissal.banner_id)
    dismissal.banner.delete()
    out = io.StringIO()

    call_command("import_account", str(directory), "--no-reindex", stdout=out)

    imported = User.objects.get(email=mallory.email)
    assert not SiteBannerDismissal.objects.filter(user=imported).exists()
    assert (
        "warning: site_banner_dismissals: a row left out "
        "(banner_id names a site_banners row this instance does not have)"
    ) in out.getvalue()
