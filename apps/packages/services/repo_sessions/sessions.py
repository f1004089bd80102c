"""Repo sessions: open, inspect, commit, check, publish, rebase and discard.

Every operation starts from the caller's own RepoSessionIndex, so another user's session id
is "not found" before anything is read. Git work is done here, outside the index's
transaction: commits are written to the source repo's object store (objects only), then the
session branch ref moves by compare-and-set and the index records the checkpoint. Publish
pushes the session commit to the source's default branch through the one publish function
(``apps.packages.services.publish.publish``) for a package; a plain repo's branch just moves.
"""

from __future__ import annotations

import difflib
from typing import Any

from django.utils import timezone

from apps.entitlements.plans import limit_for
from apps.entitlements.services.plan_cache import cached_plan
from apps.packages.actor.index import BUCKET, RepoSessionIndex
from apps.packages.models import EntitySource, SavedPackage
from apps.packages.models.sources import EntityKind
from apps.packages.services import packages, repos
from apps.packages.services.checks import run_checks
from apps.packages.services.git import (
    DEFAULT_BRANCH,
    BucketObjectStore,
    commit_files,
    is_ancestor,
    move_refs,
    read_refs,
    read_tree,
)
from apps.packages.services.git.refs import HEAD_REF
from apps.packages.services.publish import ALREADY, PUBLISHED, REJECTED, publish
from apps.packages.services.repo_sessions.workspace import Tree, tree_hash
from kody import blobs
from kody.errors import Conflict, InvalidInput, NotFound

LOG_MAX = 100


class NothingToCommit(Conflict):
    code = "nothing_to_commit"
    message = "The session has no changes since its last commit."


class CheckRunNotFound(NotFound):
    code = "check_run_not_found"
    message = "No check run with that id in this session."


def _call(user_id: str, method: str, **kwargs: Any) -> Any:
    return RepoSessionIndex.call(user_id, method, **kwargs)


def public(session: dict[str, Any]) -> dict[str, Any]:
    keys = ("id", "sourceId", "baseCommit", "status", "expiresAt")
    return {k: session[k] for k in keys}


def _resolve_source(user_id: str, repo_id: str | None, package_id: str | None) -> EntitySource:
    if bool(repo_id) == bool(package_id):
        raise InvalidInput("Pass exactly one of repoId or packageId.")
    if repo_id:
        return repos.get(user_id, repo_id)[1]
    return packages.source_of(packages.owned(user_id, package_id))


def open_session(
    user: Any,
    *,
    repo_id: str | None = None,
    package_id: str | None = None,
    conversation_id: str | None = None,
    branch: str | None = None,
) -> dict[str, Any]:
    uid = user.stable_user_id
    source = _resolve_source(uid, repo_id, package_id)
    branch = branch or DEFAULT_BRANCH
    ref = f"refs/heads/{branch}"
    base = read_refs(source.repo_id).get(ref)
    if base is None and branch != DEFAULT_BRANCH:
        raise NotFound(
            "No branch of that name in the source.",
            code="branch_not_found",
            details={"branch": branch[:200]},
        )
    limit = limit_for(cached_plan(uid), "repo_sessions")
    answer = _call(
        uid,
        "open_session",
        source={
            "sourceId": source.id,
            "repoId": source.repo_id,
            "branch": branch,
            "baseCommit": base or "",
        },
        conversation_id=conversation_id,
        limit=limit,
    )
    return {"session": public(answer["session"]), "resumed": answer["resumed"]}


def get(user_id: str, session_id: str) -> dict[str, Any]:
    return _call(user_id, "get_session", session_id=session_id)


def list_page(user_id: str, status: str | None, limit: int, cursor: str | None) -> dict[str, Any]:
    return _call(user_id, "list_sessions", status=status, limit=limit, cursor=cursor)


def discard(user_id: str, session_id: str) -> dict[str, Any]:
    """Mark discarded (rows go), then purge the spill prefix; a failed purge is retried by the
    cleanup pass, which purges again before the row goes."""
    session = _call(user_id, "discard", session_id=session_id)
    blobs.purge_prefix(BUCKET, blobs.repo_session_prefix(session["id"]))
    _drop_session_ref(session)
    return session


def _drop_session_ref(session: dict[str, Any]) -> None:
    from apps.packages.models import SourceRepoRef

    SourceRepoRef.objects.filter(
        repo_id=session["sourceRepoId"], name=f"refs/heads/{session['sessionBranch']}"
    ).delete()


# --- inspection ---------------------------------------------------------------------------


def status(user_id: str, session_id: str) -> list[dict[str, str]]:
    tree = Tree(user_id, session_id)
    return changes_of(tree)


def changes_of(tree: Tree) -> list[dict[str, str]]:
    added, deleted, out = {}, {}, []
    for path, entry in sorted(tree.changes.items()):
        if entry["deleted"]:
            if path in tree.base:
                deleted[path] = tree.base[path]
        elif path in tree.base:
            out.append({"path": path, "status": "modified"})
        else:
            added[path] = entry
    by_content: dict[str, str] = {}
    from apps.packages.services.repo_sessions.workspace import sha256

    for path, data in deleted.items():
        by_content.setdefault(sha256(data), path)
    for path, entry in added.items():
        origin = by_content.pop(entry["sha"], None)
        if origin is not None:
            deleted.pop(origin)
            out.append({"path": path, "status": "renamed", "from": origin})
        else:
            out.append({"path": path, "status": "added"})
    out += [{"path": path, "status": "deleted"} for path in deleted]
    return sorted(out, key=lambda c: c["path"])


def _text(data: bytes | None) -> list[str] | None:
    if data is None:
        return []
    try:
        return data.decode("utf-8").splitlines(keepends=True)
    except UnicodeDecodeError:
        return None


def diff(user_id: str, session_id: str, paths: list[str] | None = None) -> str:
    tree = Tree(user_id, session_id)
    chunks = []
    for path in sorted(tree.changes):
        if paths is not None and path not in paths:
            continue
        old, new = tree.base.get(path), tree.read(path)
        before, after = _text(old), _text(new)
        if before is None or after is None:
            chunks.append(f"Binary files a/{path} and b/{path} differ\n")
            continue
        lines = difflib.unified_diff(
            before,
            after,
            "/dev/null" if old is None else f"a/{path}",
            "/dev/null" if new is None else f"b/{path}",
        )
        chunks.append("".join(line if line.endswith("\n") else line + "\n" for line in lines))
    return "".join(chunks)


def log(user_id: str, session_id: str, limit: int = 20) -> list[dict[str, Any]]:
    session = get(user_id, session_id)
    store = BucketObjectStore(session["sourceRepoId"])
    sha = session["lastCheckpointCommit"] or session["baseCommit"]
    out: list[dict[str, Any]] = []
    while sha and len(out) < max(1, min(limit, LOG_MAX)):
        commit = store[sha.encode()]
        out.append(
            {
                "commit": sha,
                "message": commit.message.decode("utf-8", "replace").rstrip("\n"),
                "author": commit.author.decode("utf-8", "replace"),
                "time": commit.commit_time,
                "session": sha != session["baseCommit"]
                and not is_ancestor(store, sha, session["baseCommit"]),
            }
        )
        sha = commit.parents[0].decode() if commit.parents else None
    return out


# --- commit, checks, publish, rebase -------------------------------------------------------


def _head_commit(session: dict[str, Any]) -> str | None:
    return session["lastCheckpointCommit"] or session["baseCommit"] or None


def _tree_of(repo_id: str, commit: str | None) -> dict[str, bytes]:
    return read_tree(repo_id, commit) if commit else {}


def commit(user: Any, session_id: str, message: str) -> dict[str, Any]:
    uid = user.stable_user_id
    tree = Tree(uid, session_id)
    session = tree.session
    if session["status"] != "active":
        _call(uid, "update_session", session_id=session_id, fields={})  # raises not active
    files = tree.files()
    parent = _head_commit(session)
    repo = session["sourceRepoId"]
    if tree_hash(files) == tree_hash(_tree_of(repo, parent)):
        raise NothingToCommit()
    sha = commit_files(repo, files, parent=parent, message=message, author=packages._author(user))
    ref = f"refs/heads/{session['sessionBranch']}"
    move_refs(repo, [(ref, read_refs(repo).get(ref), sha)])
    _call(
        uid,
        "update_session",
        session_id=session_id,
        fields={"last_checkpoint_commit": sha, "last_checkpoint_at": timezone.now().isoformat()},
        expect={"last_checkpoint_commit": session["lastCheckpointCommit"]},
    )
    return {"commit": sha}


def _source_and_package(session: dict[str, Any]) -> tuple[EntitySource, SavedPackage | None]:
    source = EntitySource.objects.get(id=session["sourceId"])
    package = None
    if source.entity_kind == EntityKind.PACKAGE:
        package = SavedPackage.objects.filter(id=source.entity_id).first()
    return source, package


def run_session_checks(user: Any, session_id: str) -> dict[str, Any]:
    """The publish checks on the working tree, without publishing; an unchanged tree reuses
    its earlier run."""
    uid = user.stable_user_id
    tree = Tree(uid, session_id)
    files = tree.files()
    digest = tree_hash(files)
    earlier = _call(uid, "check_run", session_id=session_id, tree_hash=digest)
    if earlier is not None:
        return earlier
    source, package = _source_and_package(tree.session)
    checks: list[dict[str, Any]] = []
    if package is not None:
        checks = run_checks(uid, user.username, files, package_id=package.id).checks
    state = "passed" if all(c["ok"] for c in checks) else "failed"
    return _call(
        uid,
        "record_check_run",
        session_id=session_id,
        tree_hash=digest,
        status=state,
        checks=checks,
    )


def check_status(user_id: str, session_id: str, check_run_id: str) -> dict[str, Any]:
    found = _call(user_id, "check_run", session_id=session_id, check_run_id=check_run_id)
    if found is None:
        raise CheckRunNotFound(details={"checkRunId": check_run_id})
    return {"status": found["status"], "checks": found["checks"], "treeHash": found["treeHash"]}


def publish_session(user: Any, session_id: str, message: str | None = None) -> dict[str, Any]:
    uid = user.stable_user_id
    tree = Tree(uid, session_id)
    session = tree.session
    if session["status"] == "published":
        return {"status": ALREADY, "publishedCommit": session["lastCheckpointCommit"], "checks": []}
    if session["status"] != "active":
        _call(uid, "update_session", session_id=session_id, fields={})  # raises not active
    repo = session["sourceRepoId"]
    files = tree.files()
    parent = _head_commit(session)
    sha = parent
    if sha is None or tree_hash(files) != tree_hash(_tree_of(repo, parent)):
        # Uncommitted edits become one more session commit (objects only until published).
        sha = commit_files(
            repo,
            files,
            parent=parent,
            message=message or "Publish repo session",
            author=packages._author(user),
        )
    branch_ref = f"refs/heads/{session['sourceBranch']}"
    current = read_refs(repo).get(branch_ref)
    store = BucketObjectStore(repo)
    if current is not None and not is_ancestor(store, current, sha):
        check = {
            "name": "fast_forward",
            "ok": False,
            "message": "The source moved since this session started; repoRebaseSession first.",
        }
        return {"status": REJECTED, "publishedCommit": current, "checks": [check]}
    source, package = _source_and_package(session)
    if package is not None and branch_ref != HEAD_REF:
        check = {
            "name": "branch",
            "ok": False,
            "message": "A package publishes from its default branch main only.",
        }
        return {"status": REJECTED, "publishedCommit": source.published_commit, "checks": [check]}
    if package is not None:
        result = publish(
            user, source, package, sha, ref_update=(HEAD_REF, current, sha), files=files
        ).as_json()
    else:
        if current != sha:
            move_refs(repo, [(branch_ref, current, sha)])
        result = {"status": PUBLISHED, "publishedCommit": sha, "checks": []}
    if result["status"] != REJECTED:
        ref = f"refs/heads/{session['sessionBranch']}"
        move_refs(repo, [(ref, read_refs(repo).get(ref), sha)])
        _call(
            uid,
            "update_session",
            session_id=session_id,
            fields={
                "status": "published",
                "last_checkpoint_commit": sha,
                "last_checkpoint_at": timezone.now().isoformat(),
            },
        )
    return result


def rebase(user_id: str, session_id: str) -> dict[str, Any]:
    """Move the session onto the source branch's current HEAD; a path changed on both sides
    (differently) is a conflict, and any conflict changes nothing."""
    tree = Tree(user_id, session_id)
    session = tree.session
    repo = session["sourceRepoId"]
    new_head = read_refs(repo).get(f"refs/heads/{session['sourceBranch']}")
    if not new_head or new_head == session["baseCommit"]:
        return {"status": "up_to_date", "baseCommit": session["baseCommit"], "conflicts": []}
    upstream = read_tree(repo, new_head)
    kept: dict[str, bytes | None] = {}
    conflicts = []
    for path in sorted(tree.changes):
        mine, theirs, base = tree.read(path), upstream.get(path), tree.base.get(path)
        if theirs == base or theirs == mine:
            kept[path] = mine
        else:
            conflicts.append({"path": path, "reason": "changed in the session and upstream"})
    if conflicts:
        return {"status": "conflicts", "baseCommit": session["baseCommit"], "conflicts": conflicts}
    old_base = session["baseCommit"]
    tree._base = upstream  # the changes are recomputed against the new base
    tree.session = {**session, "baseCommit": old_base}
    tree.apply(kept, reset=True, rebase_to=new_head)
    return {"status": "rebased", "baseCommit": new_head, "conflicts": []}


def publish_note(user_id: str, session_id: str) -> dict[str, Any]:
    tree = Tree(user_id, session_id)
    session = tree.session
    repo = session["sourceRepoId"]
    files = tree.files()
    digest = tree_hash(files)
    checked = _call(user_id, "check_run", session_id=session_id, tree_hash=digest)
    current = read_refs(repo).get(f"refs/heads/{session['sourceBranch']}")
    return {
        "changes": changes_of(tree),
        "checks": checked["checks"] if checked else None,
        "checkStatus": checked["status"] if checked else "not_run",
        "targetBranch": session["sourceBranch"],
        "targetCommit": current,
        "sessionCommit": session["lastCheckpointCommit"],
        "uncommitted": digest != tree_hash(_tree_of(repo, _head_commit(session))),
        "needsRebase": bool(current) and current != session["baseCommit"],
    }
