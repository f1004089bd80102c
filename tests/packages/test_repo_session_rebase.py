"""Rebase and restore of a repo session: upstream changes flow in, a file changed on both
sides is a conflict that changes nothing, and restore goes back to the last commit."""

from __future__ import annotations

import pytest

from apps.packages.models import EntitySource
from apps.packages.services.git import head
from tests.packages.factories import package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

BODY = "export function greet(name: string): string {\n  return `yo ${name}`;\n}\n"


def read(agent, sid: str, path: str) -> str:
    return agent.call("repoReadFile", sessionId=sid, path=path)["content"]


def test_rebase_takes_upstream_changes_and_refuses_a_conflict_whole(as_owner, owner):
    files = package_files(owner.username)
    package = as_owner.call("packageSave", files=files)["package"]
    sid = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    as_owner.call("repoWriteFile", sessionId=sid, path="new.txt", content="session\n")
    as_owner.call(
        "repoEditFiles",
        sessionId=sid,
        edits=[{"op": "replace", "path": "mod.ts", "search": "hi", "replace": "hello"}],
    )
    # Upstream moves: README changes (no conflict).
    upstream = {**files, "README.md": "# Greeter\n\nSays hello, upstream.\n"}
    moved = as_owner.call("packageSave", files=upstream, packageId=package["id"])["package"]
    stale = as_owner.call("repoPublishSession", sessionId=sid)
    assert stale["status"] == "rejected" and stale["checks"][0]["name"] == "fast_forward"

    rebased = as_owner.call("repoRebaseSession", sessionId=sid)
    assert rebased == {"status": "rebased", "baseCommit": moved["publishedCommit"], "conflicts": []}
    assert read(as_owner, sid, "README.md").endswith("upstream.\n")
    assert "hello ${name}" in read(as_owner, sid, "mod.ts")
    changes = as_owner.call("repoStatus", sessionId=sid)["changes"]
    assert changes == [
        {"path": "mod.ts", "status": "modified"},
        {"path": "new.txt", "status": "added"},
    ]

    # Upstream changes mod.ts too: a conflict on that file, and the session is untouched.
    as_owner.call("packageSave", files={**upstream, "mod.ts": BODY}, packageId=package["id"])
    conflicted = as_owner.call("repoRebaseSession", sessionId=sid)
    assert conflicted["status"] == "conflicts"
    assert [c["path"] for c in conflicted["conflicts"]] == ["mod.ts"]
    session = as_owner.call("repoGetSession", sessionId=sid)["session"]
    assert session["baseCommit"] == moved["publishedCommit"]
    assert "hello ${name}" in read(as_owner, sid, "mod.ts")

    # Taking upstream's side resolves it; then the session publishes on top.
    as_owner.call("repoWriteFile", sessionId=sid, path="mod.ts", content=BODY)
    assert as_owner.call("repoRebaseSession", sessionId=sid)["status"] == "rebased"
    published = as_owner.call("repoPublishSession", sessionId=sid, message="Add new.txt")
    assert published["status"] == "published"
    source = EntitySource.objects.get(id=package["sourceId"])
    assert head(source.repo_id) == published["publishedCommit"] == source.published_commit


def test_restore_returns_to_the_last_commit_then_to_the_base(as_owner, owner):
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    sid = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    original = read(as_owner, sid, "README.md")
    as_owner.call("repoWriteFile", sessionId=sid, path="README.md", content="# One\n")
    as_owner.call("repoCommit", sessionId=sid, message="One")
    as_owner.call("repoWriteFile", sessionId=sid, path="README.md", content="# Two\n")
    as_owner.call("repoWriteFile", sessionId=sid, path="extra.txt", content="x")
    as_owner.call("repoRestore", sessionId=sid, paths=["README.md"])
    assert read(as_owner, sid, "README.md") == "# One\n"
    assert read(as_owner, sid, "extra.txt") == "x"
    as_owner.call("repoRestore", sessionId=sid)
    error = as_owner.error("repoReadFile", 404, sessionId=sid, path="extra.txt")
    assert error["code"] == "file_not_found"
    error = as_owner.error("repoCommit", 409, sessionId=sid, message="again")
    assert error["code"] == "nothing_to_commit"
    assert original != "# One\n"


def test_a_moved_file_shows_as_renamed_and_publish_note_says_what_would_change(as_owner, owner):
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    sid = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    as_owner.call(
        "repoEditFiles", sessionId=sid, edits=[{"op": "move", "from": "mod.ts", "to": "src/mod.ts"}]
    )
    changes = as_owner.call("repoStatus", sessionId=sid)["changes"]
    assert changes == [{"path": "src/mod.ts", "status": "renamed", "from": "mod.ts"}]
    note = as_owner.call("repoShowPublishNote", sessionId=sid)
    assert note["uncommitted"] and note["checkStatus"] == "not_run"
    assert note["targetCommit"] == package["publishedCommit"] and not note["needsRebase"]
    # package.json still exports ./mod.ts: the checks refuse, and publish changes nothing.
    result = as_owner.call("repoPublishSession", sessionId=sid)
    assert result["status"] == "rejected"
    assert any(c["name"] == "manifest" and not c["ok"] for c in result["checks"])
    source = EntitySource.objects.get(id=package["sourceId"])
    assert head(source.repo_id) == package["publishedCommit"] == source.published_commit


def test_a_plain_repo_session_starts_empty_and_publishes_by_moving_main(as_owner, as_outsider):
    repo = as_owner.call("repoCreate", name="notes")["repo"]
    session = as_owner.call("repoOpenSession", repoId=repo["id"])["session"]
    assert session["baseCommit"] == ""
    sid = session["id"]
    as_owner.call("repoWriteFile", sessionId=sid, path="a.txt", content="first\n")
    published = as_owner.call("repoPublishSession", sessionId=sid, message="First")
    assert published["status"] == "published" and published["checks"] == []
    got = as_owner.call("repoGet", repoId=repo["id"])["repo"]
    assert got["head"] == published["publishedCommit"]
    error = as_outsider.error("repoOpenSession", 404, repoId=repo["id"])
    assert error["code"] == "repo_not_found"
    error = as_owner.error("repoOpenSession", 404, repoId=repo["id"], branch="nope")
    assert error["code"] == "branch_not_found"
