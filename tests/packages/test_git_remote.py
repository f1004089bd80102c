"""The stock ``git`` client against a live uvicorn serving ``/git/<sourceId>.git``.

Clone, commit and push with a write token; then every refusal the remote owes: a force push,
a read token pushing, an expired token, another user's token, a file over 10 MiB. A refused
push leaves the refs exactly as they were.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.entitlements.services.enforcement import current_use
from apps.packages.models import EntitySource, RepoToken, UserRepo, UserStorageBucket
from apps.packages.services import packages, repo_tokens, repos
from apps.packages.services.git import BUCKET, read_refs
from apps.packages.services.git.objects import repo_prefix
from kody.blobs import list_prefix
from tests.kernel.test_mcp_live import database_url, free_port, wait_until_up
from tests.packages.test_packages import files as package_files

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])
BASE_DIR = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def server_url(django_db_setup: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path_factory.mktemp("uvicorn") / "server.log"
    env = {
        **os.environ,
        "DATABASE_URL": database_url("default"),
        "AUDIT_DATABASE_URL": database_url("audit"),
        "REDIS_URL": settings.REDIS_URL,
        "KODY_DB_CONN_MAX_AGE": "0",
        "KODY_SITE_URL": url,
        "KODY_ACTORS_INLINE": "1",
    }
    command = [
        sys.executable, "-m", "uvicorn", "config.asgi:application",
        "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=out, stderr=out)
    try:
        wait_until_up(proc, url, log)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.fixture(autouse=True)
def _site(settings, server_url: str) -> None:
    settings.SITE_URL = server_url
    settings.KODY_ACTORS_INLINE = True


class Git:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(home),
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_AUTHOR_NAME": "Ada",
            "GIT_AUTHOR_EMAIL": "ada@example.com",
            "GIT_COMMITTER_NAME": "Ada",
            "GIT_COMMITTER_EMAIL": "ada@example.com",
        }

    def __call__(self, *args: str, cwd: Path | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            ["git", *args], cwd=cwd or self.home, env=self.env, capture_output=True, text=True
        )
        if ok:
            assert done.returncode == 0, done.stdout + done.stderr
        else:
            assert done.returncode != 0, done.stdout + done.stderr
        return done.stdout + done.stderr


def auth(raw: str) -> str:
    return f"http.extraHeader=Authorization: Bearer {raw}"


@pytest.fixture
def git(tmp_path: Path) -> Git:
    return Git(tmp_path)


def commit(git: Git, work: Path, name: str, text: str, message: str) -> None:
    (work / name).write_text(text)
    git("add", name, cwd=work)
    git("commit", "-qm", message, cwd=work)


def test_clone_commit_push_and_clone_again(owner, git, tmp_path):
    repo, source = repos.create(owner.stable_user_id, "notes")
    remote = repos.git_remote(owner, source, "write", folder="notes")
    for line in remote["setupCommands"]:  # exactly what an agent is told to run
        subprocess.run(line, shell=True, cwd=tmp_path, env=git.env, check=True, capture_output=True)
    work = tmp_path / "notes"
    assert git("config", "user.email", cwd=work).strip() == owner.email
    commit(git, work, "a.txt", "one\n" * 500, "first")
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    _, reader = repo_tokens.mint(source, "read")
    git("-c", auth(reader), "clone", "-q", remote["remote"], "copy")
    copy = tmp_path / "copy"
    assert (copy / "a.txt").read_text() == "one\n" * 500

    commit(git, work, "a.txt", "one\n" * 500 + "more\n", "second")  # a delta on the wire
    commit(git, work, "b.txt", "two\n", "third")
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    pushed = git("rev-parse", "HEAD", cwd=work).strip()
    assert read_refs(source.repo_id) == {"refs/heads/main": pushed}

    git("-c", auth(reader), "pull", "-q", "--ff-only", cwd=copy)  # an incremental fetch
    assert git("rev-parse", "HEAD", cwd=copy).strip() == pushed
    assert (copy / "b.txt").read_text() == "two\n"
    git("-c", auth(reader), "clone", "-q", remote["remote"], "fresh")
    git("fsck", "--full", cwd=tmp_path / "fresh")
    assert git("rev-parse", "HEAD", cwd=tmp_path / "fresh").strip() == pushed


def _pushed_repo(owner, git, tmp_path):
    repo, source = repos.create(owner.stable_user_id, "notes")
    _, writer = repo_tokens.mint(source, "write")
    url = f"{settings.SITE_URL}/git/{source.id}.git"
    git("-c", auth(writer), "clone", "-q", url, "work")
    work = tmp_path / "work"
    git("config", "http.extraHeader", auth(writer).split("=", 1)[1], cwd=work)
    commit(git, work, "a.txt", "one\n", "first")
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    return source, url, work


def test_a_force_push_is_refused_and_the_branch_stays(owner, git, tmp_path):
    source, _url, work = _pushed_repo(owner, git, tmp_path)
    before = read_refs(source.repo_id)
    (work / "a.txt").write_text("rewritten\n")
    git("commit", "-qam", "history rewritten", "--amend", cwd=work)  # not a descendant
    out = git("push", "-f", "origin", "HEAD:main", cwd=work, ok=False)
    assert "non-fast-forward" in out
    out = git("push", "origin", ":main", cwd=work, ok=False)
    assert "default branch cannot be deleted" in out
    assert read_refs(source.repo_id) == before


def test_tokens_that_may_not_push_write_nothing(owner, outsider, git, tmp_path):
    source, url, work = _pushed_repo(owner, git, tmp_path)
    before = read_refs(source.repo_id)
    commit(git, work, "b.txt", "two\n", "second")
    git("config", "--unset", "http.extraHeader", cwd=work)  # each push below brings its own
    out = git("push", url, "HEAD:main", cwd=work, ok=False)
    assert "could not read Username" in out  # 401 with no token at all

    _, reader = repo_tokens.mint(source, "read")
    out = git("-c", auth(reader), "push", url, "HEAD:main", cwd=work, ok=False)
    assert "403" in out

    _, other_source = repos.create(outsider.stable_user_id, "bens")
    _, bens = repo_tokens.mint(other_source, "write")
    out = git("-c", auth(bens), "push", url, "HEAD:main", cwd=work, ok=False)
    assert "403" in out
    out = git("-c", auth(bens), "ls-remote", url, ok=False)
    assert "403" in out

    token, expired = repo_tokens.mint(source, "write")
    RepoToken.objects.filter(id=token.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    out = git("-c", auth(expired), "push", url, "HEAD:main", cwd=work, ok=False)
    assert "could not read Username" in out  # git asks for credentials only after a 401
    out = git("-c", auth("kgr_not-a-token"), "ls-remote", url, ok=False)
    assert "could not read Username" in out  # git asks for credentials only after a 401
    assert read_refs(source.repo_id) == before


def test_a_file_over_ten_mib_is_refused(owner, git, tmp_path):
    source, _url, work = _pushed_repo(owner, git, tmp_path)
    before = read_refs(source.repo_id)
    (work / "big.bin").write_bytes(os.urandom(10 * 1024 * 1024 + 1))
    git("add", "big.bin", cwd=work)
    git("commit", "-qm", "big", cwd=work)
    out = git("push", "origin", "HEAD:main", cwd=work, ok=False)
    assert "10 MiB" in out
    assert read_refs(source.repo_id) == before


def test_a_pushed_package_commit_is_published_on_request(owner, git, tmp_path):
    saved = packages.save(owner, package_files())
    package_id = saved["package"]["id"]
    remote = packages.git_remote(owner, package_id, "write")
    git("-c", auth(remote["token"]), "clone", "-q", remote["remote"], "pkg")
    work = tmp_path / "pkg"
    git("config", "http.extraHeader", auth(remote["token"]).split("=", 1)[1], cwd=work)
    body = "export function greet(name: string): string {\n  return `hey ${name}`;\n}\n"
    commit(git, work, "mod.ts", body, "friendlier")
    git("push", "-q", "origin", "HEAD:main", cwd=work)
    head = git("rev-parse", "HEAD", cwd=work).strip()
    source = EntitySource.objects.get(id=saved["package"]["sourceId"])
    assert source.published_commit != head  # pushed, not yet published
    assert source.external_check_until is not None

    result = packages.publish_external_push(owner, package_id)
    assert (result.status, result.published_commit) == ("published", head)
    source.refresh_from_db()
    assert source.published_commit == head and source.external_check_until is None
    again = packages.publish_external_push(owner, package_id)
    assert again.status == "already_published"


def test_garbage_and_wrong_requests_get_a_4xx_and_change_nothing(owner, server_url):
    import httpx2

    _repo, source = repos.create(owner.stable_user_id, "notes")
    _, writer = repo_tokens.mint(source, "write")
    base = f"{server_url}/git/{source.id}.git"
    headers = {"Authorization": f"Bearer {writer}"}
    with httpx2.Client(timeout=30, trust_env=False) as http:
        garbage = http.post(
            f"{base}/git-receive-pack",
            content=b"0032this is not a ref update line at all\n0000PACKjunk",
            headers={**headers, "Content-Type": "application/x-git-receive-pack-request"},
        )
        assert garbage.status_code == 400, (garbage.status_code, garbage.content)
        wrong_type = http.post(f"{base}/git-upload-pack", content=b"0000", headers=headers)
        assert wrong_type.status_code == 415
        dumb = http.get(f"{base}/info/refs", headers=headers)
        assert dumb.status_code == 403
        unknown = http.get(f"{server_url}/git/not-a-source.git/info/refs?service=git-upload-pack")
        assert unknown.status_code == 401
    assert read_refs(source.repo_id) == {}


def test_a_push_over_the_storage_limit_is_refused_and_stores_nothing(owner, git, tmp_path):
    """Pushed packs count against storage_bytes in the repo's inventory row; a push that would
    pass the plan's limit moves no ref and uploads no pack; deleting the repo releases it."""
    source, _url, work = _pushed_repo(owner, git, tmp_path)
    row = UserStorageBucket.objects.get(
        user_id=owner.stable_user_id, storage_id=f"git:{source.repo_id}"
    )
    assert row.kind == "source" and row.estimated_bytes > 0
    before, packs = (
        read_refs(source.repo_id),
        sorted(list_prefix(BUCKET, repo_prefix(source.repo_id))),
    )

    limit = limit_for(owner.plan, "storage_bytes")
    used = current_use(owner.stable_user_id, "storage_bytes") or 0
    metering.reserve_storage_bytes(owner.stable_user_id, limit - used - 1000, limit)
    (work / "noise.bin").write_bytes(os.urandom(64 * 1024))  # incompressible: a 64 KiB pack
    git("add", "noise.bin", cwd=work)
    git("commit", "-qm", "noise", cwd=work)
    out = git("push", "origin", "HEAD:main", cwd=work, ok=False)
    assert "storage limit reached" in out
    assert read_refs(source.repo_id) == before
    assert sorted(list_prefix(BUCKET, repo_prefix(source.repo_id))) == packs
    pushed = row.estimated_bytes
    row.refresh_from_db()
    assert row.estimated_bytes == pushed
    assert current_use(owner.stable_user_id, "storage_bytes") == limit - 1000

    repo = UserRepo.objects.get(user_id=owner.stable_user_id)
    repos.delete(owner.stable_user_id, repo.id)
    assert not UserStorageBucket.objects.filter(user_id=owner.stable_user_id).exists()
