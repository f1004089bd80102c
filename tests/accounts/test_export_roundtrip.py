"""Export → delete → import → delete: the promise that people can take their data and leave."""

from __future__ import annotations

import io
import json
import secrets
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.files.base import ContentFile
from django.core.management import CommandError, call_command
from django.test import override_settings

from apps.accounts.models import User
from apps.accounts.services import tokens
from apps.jobs.models import Job
from apps.packages.models import McpMemory, ValueBucket, ValueEntry
from config.buckets import bucket_storages
from kody import blobs
from kody.blobs.keys import email_raw_key
from kody.kv import store
from tests.accounts.factories import UserFactory
from tests.accounts.test_deletion import traces_of
from tests.jobs.factories import JobFactory
from tests.packages.factories import McpMemoryFactory, ValueBucketFactory, ValueEntryFactory

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

# Columns that legitimately differ after an import: new auto-increment keys and new users.id.
RENUMBERED = {"id", "user_id"}


@pytest.fixture(autouse=True)
def _setup(settings, tmp_path):  # type: ignore[no-untyped-def]
    settings.KODY_ACTORS_INLINE = True
    conf = bucket_storages(
        use_s3=False, endpoint_url="", bucket_prefix="", var_dir=tmp_path / "var"
    )
    with override_settings(STORAGES={**django_settings.STORAGES, **conf}):
        yield


def make_owner() -> User:
    # A run-unique person, not the cast: these tests commit, and the import must land in a
    # schema no earlier test left behind.
    user = UserFactory(username=f"owner-{secrets.token_hex(3)}")
    bucket = ValueBucketFactory(id=secrets.token_hex(8), user_id=user.stable_user_id)
    for n in range(5):
        ValueEntryFactory(bucket=bucket, name=f"v{n}", value=f"value {n} ünïcode")
    McpMemoryFactory(
        id=secrets.token_hex(8),
        user_id=user.stable_user_id,
        subject="coffee",
        summary="likes it strong",
    )
    tokens.create_token(user, name="laptop")
    key = email_raw_key(user.stable_user_id, "m1")
    blobs.bucket("email_blobs").save(key, ContentFile(bytes(range(256)) * 2000))
    return user


def export(email: str, out: Path) -> Path:
    call_command("export_account", email, "--out", str(out), "--no-progress", stdout=io.StringIO())
    return out


def table_rows(directory: Path) -> dict[str, list[dict]]:
    found = {}
    for path in sorted((directory / "sections").glob("d1_table.*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines()]
        found[path.name[len("d1_table.") : -len(".jsonl")]] = sorted(
            json.dumps({k: v for k, v in row.items() if k not in RENUMBERED}, sort_keys=True)
            for row in rows
        )
    return found


def test_export_delete_import_delete(tmp_path):
    owner = make_owner()
    email, stable = owner.email, owner.stable_user_id
    first = export(email, tmp_path / "first")
    call_command("purge_account", email, "--yes", stdout=io.StringIO())
    assert not User.objects.filter(stable_user_id=stable).exists()

    out = io.StringIO()
    call_command("import_account", str(first), stdout=out)
    printed = out.getvalue()
    assert "not imported access_tokens: credentials" in printed
    imported = User.objects.get(stable_user_id=stable)
    assert imported.email == email and not imported.has_usable_password()
    assert ValueEntry.objects.filter(bucket__user_id=stable).count() == 5
    assert McpMemory.objects.get(user_id=stable).summary == "likes it strong"
    key = email_raw_key(stable, "m1")
    assert blobs.bucket("email_blobs").open(key).read() == bytes(range(256)) * 2000

    second = export(email, tmp_path / "second")
    before, after = table_rows(first), table_rows(second)
    for table in ("value_buckets", "value_entries", "mcp_memories"):
        assert after[table] == before[table], table
    assert before["access_tokens"] and "access_tokens" not in {
        t for t, rows in after.items() if rows
    }

    call_command("purge_account", email, "--yes", stdout=io.StringIO())
    assert traces_of(stable, email) == []
    assert list(blobs.list_prefix("email_blobs", f"email-raw:v1:{stable}/")) == []


def test_import_refuses_a_tampered_export_and_writes_nothing(tmp_path):
    owner = make_owner()
    first = export(owner.email, tmp_path / "first")
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())
    entries = first / "sections" / "d1_table.value_entries.jsonl"
    entries.write_text(entries.read_text().replace("value 1", "value X"))
    with pytest.raises(CommandError, match="checksum mismatch"):
        call_command("import_account", str(first), stdout=io.StringIO())
    assert not User.objects.filter(stable_user_id=owner.stable_user_id).exists()


def test_import_refuses_an_account_that_exists_and_a_future_schema(tmp_path):
    owner = make_owner()
    first = export(owner.email, tmp_path / "first")
    with pytest.raises(CommandError, match="already exists"):
        call_command("import_account", str(first), stdout=io.StringIO())
    manifest = json.loads((first / "manifest.json").read_text())
    manifest["schemaVersion"] = 2
    (first / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CommandError, match="schema version"):
        call_command("import_account", str(first), stdout=io.StringIO())


def test_a_failure_mid_import_leaves_no_rows(tmp_path, monkeypatch):
    from apps.accounts.export import importer

    owner = make_owner()
    stable = owner.stable_user_id
    first = export(owner.email, tmp_path / "first")
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())
    real = importer._import_table

    def fail_on_memories(directory, target, *args):  # type: ignore[no-untyped-def]
        if target.table == "mcp_memories":
            raise RuntimeError("disk full")
        return real(directory, target, *args)

    monkeypatch.setattr(importer, "_import_table", fail_on_memories)
    with pytest.raises(RuntimeError):
        call_command("import_account", str(first), "--no-reindex", stdout=io.StringIO())
    assert not User.objects.filter(stable_user_id=stable).exists()
    assert not ValueBucket.objects.filter(user_id=stable).exists()


def mail_and_storage(user: User, subject: str) -> None:
    """A delivered email (mailbox rows + raw MIME blob) and a StorageRunner bucket."""
    from email.message import EmailMessage

    from apps.jobs.actor import StorageRunner
    from apps.mailbox.services import inbound

    msg = EmailMessage()
    msg["From"] = "Grace <grace@example.org>"
    msg["To"] = f"{user.username}@{django_settings.KODY_MAIL_DOMAIN}"
    msg["Subject"] = subject
    msg["Message-ID"] = f"<{subject.replace(' ', '-')}@example.org>"
    msg.set_content(f"{subject}: the body ünïcode\n")
    outcome = inbound.deliver(msg.as_bytes(), msg["To"])
    assert outcome.status == "received", outcome
    StorageRunner.call(
        user.stable_user_id, "set_value", storage_id="job:j1", key="cursor", value={"at": subject}
    )
    JobFactory(id=f"job-{user.stable_user_id[:12]}", user_id=user.stable_user_id, name=subject)
    store.put(f"package-retriever-manifest:v1:{user.stable_user_id}:x", subject.encode())


def actor_state(stable: str) -> tuple[dict, dict]:
    from apps.jobs.actor import StorageRunner
    from apps.mailbox.actor import Mailbox

    return (
        Mailbox.call(stable, "count"),
        StorageRunner.call(stable, "get_value", storage_id="job:j1", key="cursor"),
    )


@pytest.fixture
def mail_domain(settings):  # type: ignore[no-untyped-def]
    settings.KODY_MAIL_DOMAIN = "mail.test"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"


def test_mail_and_storage_travel_through_actor_state(tmp_path, mail_domain):
    owner, other = make_owner(), make_owner()
    mail_and_storage(owner, "owner letter")
    mail_and_storage(other, "other letter")
    stable, email = owner.stable_user_id, owner.email
    owner_state, other_state = actor_state(stable), actor_state(other.stable_user_id)
    assert owner_state[0]["messages"] == 1 and owner_state[1]["value"] == {"at": "owner letter"}
    raw_keys = sorted(blobs.list_prefix("email_blobs", f"email-raw:v1:{stable}/"))
    raw = {key: blobs.bucket("email_blobs").open(key).read() for key in raw_keys}
    assert len(raw) == 2  # the m1 blob from make_owner and the delivered message

    first = export(email, tmp_path / "first")
    call_command("purge_account", email, "--yes", stdout=io.StringIO())
    out = io.StringIO()
    call_command("import_account", str(first), "--no-reindex", stdout=out)
    printed = out.getvalue()
    assert "imported mailbox.email_messages: 1" in printed
    assert "imported storage_runner.storage_entries: 1" in printed
    assert "not imported actor:user_meter: usage counters" in printed

    assert actor_state(stable) == owner_state
    assert Job.objects.get(user_id=stable).name == "owner letter"
    for key, content in raw.items():
        assert blobs.bucket("email_blobs").open(key).read() == content
    second = export(email, tmp_path / "second")
    assert (second / "sections" / "mailbox.jsonl").read_text() == (
        first / "sections" / "mailbox.jsonl"
    ).read_text()
    assert (second / "sections" / "storage_runner.jsonl").read_text() == (
        first / "sections" / "storage_runner.jsonl"
    ).read_text()

    call_command("purge_account", email, "--yes", stdout=io.StringIO())
    assert traces_of(stable, email) == []
    assert list(blobs.list_prefix("email_blobs", f"email-raw:v1:{stable}/")) == []
    assert not Job.objects.filter(user_id=stable).exists()
    assert store.get(f"package-retriever-manifest:v1:{stable}:x") is None
    # The other person is untouched.
    assert actor_state(other.stable_user_id) == other_state
    assert Job.objects.get(user_id=other.stable_user_id).name == "other letter"
    assert store.get(f"package-retriever-manifest:v1:{other.stable_user_id}:x") == b"other letter"


def test_an_import_stopped_in_actor_state_resumes(tmp_path, mail_domain, monkeypatch):
    from apps.mailbox.actor import Mailbox

    owner = make_owner()
    mail_and_storage(owner, "letter")
    stable, before = owner.stable_user_id, actor_state(owner.stable_user_id)
    first = export(owner.email, tmp_path / "first")
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())

    real = Mailbox.import_page

    def disk_full(self, page):  # type: ignore[no-untyped-def]
        if page["section"] == "messages":
            raise RuntimeError("disk full")
        return real(self, page)

    monkeypatch.setattr(Mailbox, "import_page", disk_full)
    with pytest.raises(CommandError, match="import incomplete.*--resume"):
        call_command("import_account", str(first), "--no-reindex", stdout=io.StringIO())
    assert User.objects.filter(stable_user_id=stable).exists()
    assert actor_state(stable)[0]["messages"] == 0

    monkeypatch.setattr(Mailbox, "import_page", real)
    call_command("import_account", str(first), "--resume", "--no-reindex", stdout=io.StringIO())
    call_command(
        "import_account", str(first), "--resume", "--no-reindex", stdout=io.StringIO()
    )  # idempotent
    assert actor_state(stable) == before


def test_repos_travel_as_git_bundles_with_their_full_history(tmp_path):
    import subprocess

    from apps.packages.models import EntitySource
    from apps.packages.services import repos
    from apps.packages.services.git import Author, commit_files, move_refs, read_refs, read_tree

    owner = make_owner()
    email = owner.email
    _repo, source = repos.create(owner.stable_user_id, "notes")
    first = commit_files(
        source.repo_id, {"a.txt": b"one"}, parent=None, message="one", author=Author("a", "a@b")
    )
    second = commit_files(
        source.repo_id, {"a.txt": b"two"}, parent=first, message="two", author=Author("a", "a@b")
    )
    move_refs(source.repo_id, [("refs/heads/main", None, second)])

    exported = export(email, tmp_path / "out")
    rows = [
        json.loads(x)
        for x in (exported / "sections/artifact_repos.jsonl").read_text().split("\n")
        if x
    ]
    assert [(r["sourceId"], r["refs"]) for r in rows] == [(source.id, {"refs/heads/main": second})]
    bundle = exported / rows[0]["bundle"]
    # The stock git client reads the bundle: both commits are there.
    log = subprocess.run(
        ["git", "clone", "-q", str(bundle), str(tmp_path / "clone")], capture_output=True, text=True
    )
    assert log.returncode == 0, log.stderr
    history = subprocess.run(
        ["git", "-C", str(tmp_path / "clone"), "log", "--format=%s"], capture_output=True, text=True
    ).stdout.split()
    assert history == ["two", "one"]

    call_command("purge_account", email, "--yes", stdout=io.StringIO())
    assert read_refs(source.repo_id) == {}
    call_command("import_account", str(exported), stdout=io.StringIO())
    restored = EntitySource.objects.get(id=source.id)
    assert read_refs(restored.repo_id) == {"refs/heads/main": second}
    assert read_tree(restored.repo_id, first) == {"a.txt": b"one"}
    call_command("purge_account", email, "--yes", stdout=io.StringIO())
