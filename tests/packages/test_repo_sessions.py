"""Repo sessions over the agent API: an agent opens a session on its package, edits it with
every op, inspects, commits, checks and publishes; bad edits and failing checks change
nothing; big files spill and come back byte-exact; and another user finds nothing."""

from __future__ import annotations

import os

import pytest

from apps.packages.actor.index import BUCKET
from apps.packages.models import EntitySource, UserStorageBucket
from apps.packages.services.git import head, read_tree
from kody import blobs
from kody.kv import keys as kv_keys
from kody.kv import store as kv
from tests.packages.factories import package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

MIB = 1024 * 1024


@pytest.fixture
def package(as_owner, owner) -> dict:
    return as_owner.call("packageSave", files=package_files(owner.username))["package"]


@pytest.fixture
def session(as_owner, package) -> dict:
    return as_owner.call("repoOpenSession", packageId=package["id"])["session"]


def spilled(session_id: str) -> list[str]:
    return list(blobs.list_prefix(BUCKET, blobs.repo_session_prefix(session_id)))


def test_the_whole_agent_loop_publishes_a_new_commit_with_a_readable_snapshot(
    as_owner, package, owner
):
    opened = as_owner.call("repoOpenSession", packageId=package["id"], conversationId="c1")
    session = opened["session"]
    assert set(session) == {"id", "sourceId", "baseCommit", "status", "expiresAt"}
    assert session["baseCommit"] == package["publishedCommit"] and session["status"] == "active"
    sid = session["id"]
    # The same conversation resumes the same session instead of opening another.
    again = as_owner.call("repoOpenSession", packageId=package["id"], conversationId="c1")
    assert again["session"]["id"] == sid

    edits = [
        {"op": "replace", "path": "mod.ts", "search": "`hi ${name}`", "replace": "`hey ${name}`"},
        {"op": "write", "path": "notes.txt", "content": "draft\n"},
        {"op": "move", "from": "notes.txt", "to": "docs/notes.md"},
        {"op": "writeJson", "path": "data/config.json", "value": {"greeting": "hey"}},
        {"op": "write", "path": "scratch.txt", "content": "tmp"},
        {"op": "delete", "path": "scratch.txt"},
        {"op": "replace", "path": "README.md", "search": "Says hello.", "replace": "Says hey."},
    ]
    assert as_owner.call("repoEditFiles", sessionId=sid, edits=edits)["applied"] == 7
    patch = "--- a/docs/notes.md\n+++ b/docs/notes.md\n@@ -1 +1,2 @@\n draft\n+more\n"
    as_owner.call("repoApplyPatch", sessionId=sid, patch=patch)
    read = as_owner.call("repoReadFile", sessionId=sid, path="docs/notes.md")
    assert read == {"content": "draft\nmore\n", "encoding": "utf-8", "size": 11}

    changes = as_owner.call("repoStatus", sessionId=sid)["changes"]
    assert changes == [
        {"path": "README.md", "status": "modified"},
        {"path": "data/config.json", "status": "added"},
        {"path": "docs/notes.md", "status": "added"},
        {"path": "mod.ts", "status": "modified"},
    ]
    diff = as_owner.call("repoDiff", sessionId=sid, paths=["mod.ts"])["diff"]
    assert "-  return `hi ${name}`;" in diff and "+  return `hey ${name}`;" in diff
    found = as_owner.call("repoSearch", sessionId=sid, query="hey")["matches"]
    assert {"path": "mod.ts", "line": 2, "text": "  return `hey ${name}`;"} in found
    tree = as_owner.call("repoTree", sessionId=sid)["entries"]
    assert [e["path"] for e in tree] == ["README.md", "data", "docs", "mod.ts", "package.json"]

    commit = as_owner.call("repoCommit", sessionId=sid, message="Say hey")["commit"]
    log = as_owner.call("repoLog", sessionId=sid)["commits"]
    assert [c["commit"] for c in log[:2]] == [commit, package["publishedCommit"]]
    run = as_owner.call("repoRunChecks", sessionId=sid)["checkRunId"]
    checked = as_owner.call("repoGetCheckStatus", sessionId=sid, checkRunId=run)
    assert checked["status"] == "passed" and all(c["ok"] for c in checked["checks"])
    # An unchanged tree is not checked again.
    assert as_owner.call("repoRunChecks", sessionId=sid)["checkRunId"] == run
    note = as_owner.call("repoShowPublishNote", sessionId=sid)
    assert note["targetCommit"] == package["publishedCommit"] and not note["uncommitted"]
    assert note["checkStatus"] == "passed" and len(note["changes"]) == 4

    published = as_owner.call("repoPublishSession", sessionId=sid)
    assert published["status"] == "published" and published["publishedCommit"] == commit
    source = EntitySource.objects.get(id=package["sourceId"])
    assert source.published_commit == commit == head(source.repo_id)
    assert read_tree(source.repo_id, commit)["docs/notes.md"] == b"draft\nmore\n"
    snapshot = kv.get_json(kv_keys.source_snapshot(source.id, commit))
    assert "hey ${name}" in snapshot["files"]["mod.ts"]
    got = as_owner.call("packageGet", packageId=package["id"])["package"]
    assert got["publishedCommit"] == commit
    assert as_owner.call("repoGetSession", sessionId=sid)["session"]["status"] == "published"
    again = as_owner.call("repoPublishSession", sessionId=sid)
    assert again["status"] == "already_published"


def test_a_patch_with_a_bad_hunk_changes_nothing_and_names_the_hunk(as_owner, session):
    sid = session["id"]
    as_owner.call("repoWriteFile", sessionId=sid, path="a.txt", content="one\ntwo\n")
    patch = (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+TWO\n"
        "--- a/mod.ts\n+++ b/mod.ts\n@@ -7,1 +7,1 @@\n-not there\n+x\n"
    )
    error = as_owner.error("repoApplyPatch", 422, sessionId=sid, patch=patch)
    assert error["code"] == "patch_rejected" and "@@ -7,1 +7,1 @@" in error["message"]
    read = as_owner.call("repoReadFile", sessionId=sid, path="a.txt")
    assert read["content"] == "one\ntwo\n"
    assert [c["path"] for c in as_owner.call("repoStatus", sessionId=sid)["changes"]] == ["a.txt"]


def test_a_batch_with_an_ambiguous_replace_changes_nothing(as_owner, session):
    sid = session["id"]
    edits = [
        {"op": "write", "path": "x.txt", "content": "aa"},
        {"op": "replace", "path": "x.txt", "search": "a", "replace": "b"},
    ]
    error = as_owner.error("repoEditFiles", 422, sessionId=sid, edits=edits)
    assert error["code"] == "replace_not_unique" and error["details"]["matches"] == 2
    assert as_owner.call("repoStatus", sessionId=sid)["changes"] == []


def test_a_failing_check_publishes_nothing(as_owner, package, session):
    sid = session["id"]
    as_owner.call(
        "repoWriteFile", sessionId=sid, path="mod.ts", content='export const x: number = "t";\n'
    )
    run = as_owner.call("repoRunChecks", sessionId=sid)["checkRunId"]
    checked = as_owner.call("repoGetCheckStatus", sessionId=sid, checkRunId=run)
    assert checked["status"] == "failed"
    assert [c["name"] for c in checked["checks"] if not c["ok"]] == ["typecheck"]

    result = as_owner.call("repoPublishSession", sessionId=sid, message="broken")
    assert result["status"] == "rejected"
    assert result["publishedCommit"] == package["publishedCommit"]
    source = EntitySource.objects.get(id=package["sourceId"])
    assert source.published_commit == package["publishedCommit"] == head(source.repo_id)
    after = as_owner.call("repoGetSession", sessionId=sid)["session"]
    assert after["status"] == "active" and after["lastCheckpointCommit"] is None


def test_a_3_mib_file_spills_to_the_bucket_and_reads_back_byte_exact(as_owner, session, owner):
    sid = session["id"]
    text = os.urandom(3 * MIB // 2).hex()  # 3 MiB of text: fits the API's 4 MiB body cap
    as_owner.call("repoWriteFile", sessionId=sid, path="assets/big.txt", content=text)
    [key] = spilled(sid)
    assert key.startswith(f"repo-session:{sid}/")
    read = as_owner.call("repoReadFile", sessionId=sid, path="assets/big.txt")
    assert read["encoding"] == "utf-8" and read["size"] == 3 * MIB
    assert read["content"] == text
    # (the package's published source has its own inventory row, kind "source")
    bucket = UserStorageBucket.objects.get(user_id=owner.stable_user_id, kind="repo_session")
    assert bucket.storage_id == f"repo-session:{sid}"
    assert bucket.estimated_bytes == 3 * MIB
    commit = as_owner.call("repoCommit", sessionId=sid, message="Add asset")["commit"]
    source = EntitySource.objects.get(id=session["sourceId"])
    assert read_tree(source.repo_id, commit)["assets/big.txt"] == text.encode()

    as_owner.call("repoDiscardSession", sessionId=sid)
    assert spilled(sid) == []
    assert not UserStorageBucket.objects.filter(
        user_id=owner.stable_user_id, kind="repo_session"
    ).exists()
    error = as_owner.error("repoReadFile", 409, sessionId=sid, path="README.md")
    assert error["code"] == "repo_session_not_active"


def test_an_11_mib_write_is_refused_and_stores_nothing(as_owner, session, settings):
    # Past the API's own body cap the transport refuses first; with the cap raised the
    # session's 10 MiB per-file policy is what refuses.
    sid = session["id"]
    data = os.urandom(11 * MIB // 2).hex()
    error = as_owner.error("repoWriteFile", 413, sessionId=sid, path="huge.txt", content=data)
    assert error["code"] == "payload_too_large"
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 32 * MIB
    error = as_owner.error("repoWriteFile", 413, sessionId=sid, path="huge.txt", content=data)
    assert error["code"] == "file_too_large" and error["details"]["max"] == 10 * MIB
    edits = [
        {"op": "write", "path": "small.txt", "content": "ok"},
        {"op": "write", "path": "big.txt", "content": data[: 2 * MIB]},
        {"op": "write", "path": "huge.txt", "content": data},
    ]
    error = as_owner.error("repoEditFiles", 413, sessionId=sid, edits=edits)
    assert error["code"] == "file_too_large"
    assert spilled(sid) == []
    assert as_owner.call("repoStatus", sessionId=sid)["changes"] == []


def test_the_free_plan_holds_15_active_sessions_and_a_16th_is_refused(as_owner, package):
    opened = [as_owner.call("repoOpenSession", packageId=package["id"]) for _ in range(15)]
    error = as_owner.error("repoOpenSession", 403, packageId=package["id"])
    assert error["code"] == "limit_reached" and error["details"]["limit"] == 15
    usage = as_owner.call("repoListSessions", status="active", limit=100)["sessions"]
    assert len(usage) == 15
    # Discarding one frees its place.
    as_owner.call("repoDiscardSession", sessionId=opened[0]["session"]["id"])
    as_owner.call("repoOpenSession", packageId=package["id"])


SESSION_CAPABILITIES = {
    "repoGetSession": {},
    "repoDiscardSession": {},
    "repoPublishSession": {},
    "repoRebaseSession": {},
    "repoReadFile": {"path": "mod.ts"},
    "repoWriteFile": {"path": "mod.ts", "content": "stolen"},
    "repoEditFiles": {"edits": [{"op": "delete", "path": "mod.ts"}]},
    "repoApplyPatch": {"patch": "--- a/mod.ts\n+++ b/mod.ts\n@@ -1 +1 @@\n-a\n+b\n"},
    "repoRestore": {},
    "repoCommit": {"message": "x"},
    "repoDiff": {},
    "repoLog": {},
    "repoStatus": {},
    "repoTree": {},
    "repoSearch": {"query": "greet"},
    "repoRunChecks": {},
    "repoGetCheckStatus": {"checkRunId": "whatever"},
    "repoShowPublishNote": {},
}


@pytest.mark.parametrize("name", sorted(SESSION_CAPABILITIES))
def test_another_users_session_id_is_not_found(as_owner, as_outsider, session, name):
    sid = session["id"]
    as_owner.call("repoWriteFile", sessionId=sid, path="mod.ts", content="mine\n")
    error = as_outsider.error(name, 404, sessionId=sid, **SESSION_CAPABILITIES[name])
    assert error["code"] == "repo_session_not_found"
    assert as_owner.call("repoReadFile", sessionId=sid, path="mod.ts")["content"] == "mine\n"
    assert as_owner.call("repoGetSession", sessionId=sid)["session"]["status"] == "active"


def test_the_outsider_lists_nothing_and_cannot_open_on_the_owners_package(
    as_owner, as_outsider, package, session
):
    assert as_outsider.call("repoListSessions") == {"sessions": [], "nextCursor": None}
    error = as_outsider.error("repoOpenSession", 404, packageId=package["id"])
    assert error["code"] == "package_not_found"
    listed = as_owner.call("repoListSessions")["sessions"]
    assert [s["id"] for s in listed] == [session["id"]]


def test_every_repo_session_capability_has_an_isolation_test():
    from kody.capabilities import all_capabilities

    module = "apps.packages.capabilities.repo_sessions"
    declared = {c.name for c in all_capabilities() if c.handler.__module__ == module}
    # The two without a session id are covered by the outsider test just above.
    assert declared == set(SESSION_CAPABILITIES) | {"repoOpenSession", "repoListSessions"}
    assert len(declared) == 20
