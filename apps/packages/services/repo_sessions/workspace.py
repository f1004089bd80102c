"""A session's working tree: its base commit's files with the session's changes on top.

The index keeps only the paths that differ from the base (``apply_changes``); this module
turns bytes into those changes and back. Content up to ``INLINE_MAX`` is stored inline in the
owner's schema; larger content is written first to ``repo_session_blobs`` under the session's
prefix, content-addressed (``repo-session:{sessionId}/objects/{sha256}``), and only then
recorded — a call that fails after the write leaves an object the session's prefix purge
removes, never a row pointing at nothing. Above ``MAX_FILE`` a write is refused.
"""

from __future__ import annotations

import base64
import hashlib
import posixpath
import stat
from typing import Any

from django.core.files.base import ContentFile
from dulwich.errors import NotTreeError
from dulwich.object_store import tree_lookup_path

from apps.packages.actor.index import BUCKET, RepoSessionIndex, SessionNotActive
from apps.packages.services.git import BucketObjectStore, read_tree
from apps.packages.services.git.receive import MAX_FILE_BYTES
from apps.packages.services.git.repo import _tree_for
from kody import blobs
from kody.errors import InvalidInput, KodyError

INLINE_MAX = 1536 * 1024  # ~1.5 MiB: larger content spills to the bucket
MAX_FILE = MAX_FILE_BYTES  # 10 MiB per file, as for a push
MAX_PATH = 1024


class FileTooLarge(KodyError):
    code = "file_too_large"
    status = 413
    message = "A file in a repo session is at most 10 MiB."


class FileNotInSession(KodyError):
    code = "file_not_found"
    status = 404
    message = "No file at that path in this session."


def check_path(path: Any) -> str:
    if not isinstance(path, str) or not path or len(path) > MAX_PATH:
        raise InvalidInput("A path is 1-1024 characters.", code="invalid_path")
    parts = path.split("/")
    if path.startswith("/") or any(p in ("", ".", "..", ".git") for p in parts):
        raise InvalidInput(
            "File paths are relative, without '.', '..' or '.git'.",
            code="invalid_path",
            details={"path": path[:200]},
        )
    return path


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def spill_key(session_id: str, digest: str) -> str:
    return f"{blobs.repo_session_prefix(session_id)}objects/{digest}"


def _spill(session_id: str, data: bytes, digest: str) -> str:
    key = spill_key(session_id, digest)
    storage = blobs.bucket(BUCKET)
    if not storage.exists(key):  # content-addressed: an existing object is this content
        saved = storage.save(key, ContentFile(data))
        if saved != key:  # a racing writer stored the same bytes first; keep one object
            storage.delete(saved)
    return key


def content_of(entry: dict[str, Any]) -> bytes:
    if entry.get("blobKey"):
        with blobs.bucket(BUCKET).open(entry["blobKey"], "rb") as handle:
            return handle.read()
    return base64.b64decode(entry.get("content") or "")


class Tree:
    """The working tree of one session, read once per operation."""

    def __init__(self, user_id: str, session_id: str, paths: list[str] | None = None) -> None:
        answer = RepoSessionIndex.call(user_id, "workspace", session_id=session_id, paths=paths)
        self.user_id = user_id
        self.session: dict[str, Any] = answer["session"]
        if self.session["status"] == "discarded":  # its workspace is gone
            raise SessionNotActive(details={"sessionId": session_id, "status": "discarded"})
        self.id: str = self.session["id"]
        self.changes = {f["path"]: f for f in answer["files"]}
        self._base: dict[str, bytes] | None = None
        self._objects: BucketObjectStore | None = None

    def _store(self) -> BucketObjectStore:
        if self._objects is None:
            self._objects = BucketObjectStore(self.session["sourceRepoId"])
        return self._objects

    def base_get(self, path: str) -> bytes | None:
        """One path of the base commit, found through its trees (an edit of a few files need
        not read every blob of the base)."""
        if self._base is not None:
            return self._base.get(path)
        if not self.session["baseCommit"]:
            return None
        store = self._store()
        try:
            root = store[self.session["baseCommit"].encode()].tree  # type: ignore[attr-defined]
            mode, sha = tree_lookup_path(store.__getitem__, root, path.encode())
        except (KeyError, NotTreeError):
            return None
        return store[sha].as_raw_string() if stat.S_ISREG(mode) else None

    @property
    def base(self) -> dict[str, bytes]:
        if self._base is None and not self.session["baseCommit"]:
            self._base = {}  # a session on an empty repo starts from nothing
        if self._base is None:
            repo = self.session["sourceRepoId"]
            self._base = read_tree(repo, self.session["baseCommit"], store=self._store())
        return self._base

    def read(self, path: str) -> bytes | None:
        entry = self.changes.get(path)
        if entry is not None:
            return None if entry["deleted"] else content_of(entry)
        return self.base_get(path)

    def files(self) -> dict[str, bytes]:
        out = dict(self.base)
        for path, entry in self.changes.items():
            if entry["deleted"]:
                out.pop(path, None)
            else:
                out[path] = content_of(entry)
        return out

    def change_for(self, path: str, data: bytes | None) -> dict[str, Any]:
        """The index change that makes ``path`` hold ``data`` (``None``: deleted)."""
        base = self.base_get(path)
        if data == base:
            return {"path": path, "revert": True}
        if data is None:
            return {"path": path, "deleted": True}
        if len(data) > MAX_FILE:
            raise FileTooLarge(details={"path": path[:200], "size": len(data), "max": MAX_FILE})
        digest = sha256(data)
        if len(data) > INLINE_MAX:
            return {
                "path": path,
                "blobKey": _spill(self.id, data, digest),
                "size": len(data),
                "sha": digest,
            }
        encoded = base64.b64encode(data).decode()
        return {"path": path, "content": encoded, "size": len(data), "sha": digest}

    def apply(
        self, final: dict[str, bytes | None], *, reset: bool = False, rebase_to: str | None = None
    ) -> dict[str, Any]:
        """Record ``path -> bytes | None`` in one all-or-nothing index call. Every size is
        checked before the first spill, so a refused batch writes no object."""
        for path, data in final.items():
            if data is not None and len(data) > MAX_FILE:
                raise FileTooLarge(details={"path": path[:200], "size": len(data), "max": MAX_FILE})
        changes = [self.change_for(path, data) for path, data in final.items()]
        return RepoSessionIndex.call(
            self.user_id,
            "apply_changes",
            session_id=self.id,
            changes=changes,
            base_commit=self.session["baseCommit"],
            reset=reset,
            rebase_to=rebase_to,
        )


def tree_hash(files: dict[str, bytes]) -> str:
    """The git tree id of ``files`` (nothing is stored): what check results are keyed by."""
    if not files:
        return "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree
    return _tree_for({}, files).id.decode()


def directory_listing(files: dict[str, bytes], path: str | None) -> list[dict[str, Any]]:
    prefix = (path.strip("/") + "/") if path and path.strip("/") else ""
    entries: dict[str, dict[str, Any]] = {}
    for name, data in files.items():
        if not name.startswith(prefix):
            continue
        rest = name[len(prefix) :]
        head, sep, _tail = rest.partition("/")
        full = posixpath.join(prefix, head) if prefix else head
        if sep:
            entries.setdefault(head, {"path": full, "type": "dir"})
        else:
            entries[head] = {"path": full, "type": "file", "size": len(data)}
    return [entries[k] for k in sorted(entries)]
