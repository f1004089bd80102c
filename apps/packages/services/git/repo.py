"""Opening a repo for dulwich, writing commits from files, reading trees back."""

from __future__ import annotations

import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass

from dulwich.objects import Blob, Commit, Tree
from dulwich.refs import DictRefsContainer
from dulwich.repo import MemoryRepo

from apps.packages.services.git import refs as refs_mod
from apps.packages.services.git.objects import BUCKET, BucketObjectStore, repo_prefix
from kody.blobs import purge_prefix


@dataclass(frozen=True)
class Author:
    name: str
    email: str

    def line(self) -> bytes:
        return f"{self.name} <{self.email}>".encode()


class SourceRepo(MemoryRepo):
    """A repo whose objects are in the bucket and whose refs are a snapshot of Postgres'."""

    def __init__(self, repo_id: str) -> None:
        super().__init__()
        self.repo_id = repo_id
        self.owner_id: str | None = None
        self.object_store = BucketObjectStore(repo_id)
        snapshot = {k.encode(): v.encode() for k, v in refs_mod.read_refs(repo_id).items()}
        self.refs = DictRefsContainer(snapshot)
        self.refs.set_symbolic_ref(b"HEAD", refs_mod.HEAD_REF.encode())


def open_repo(repo_id: str) -> SourceRepo:
    return SourceRepo(repo_id)


def _tree_for(store: dict[bytes, object], files: Mapping[str, bytes]) -> Tree:
    """Build nested trees from ``path -> bytes``; every object lands in ``store``."""
    root: dict[str, object] = {}
    for path, data in files.items():
        parts = path.split("/")
        node = root
        for part in parts[:-1]:
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[parts[-1]] = data

    def build(node: dict[str, object]) -> Tree:
        tree = Tree()
        for name, value in node.items():
            if isinstance(value, dict):
                sub = build(value)
                tree.add(name.encode(), stat.S_IFDIR, sub.id)
            else:
                blob = Blob.from_string(value)  # type: ignore[arg-type]
                store[blob.id] = blob
                tree.add(name.encode(), 0o100644, blob.id)
        store[tree.id] = tree
        return tree

    return build(root)


def commit_files(
    repo_id: str,
    files: Mapping[str, bytes],
    *,
    parent: str | None,
    message: str,
    author: Author,
    now: int | None = None,
) -> str:
    """Write a commit whose tree is exactly ``files`` on top of ``parent``; returns its sha.

    Only objects are written (one new pack): the caller moves the ref, in its own transaction.
    """
    objects: dict[bytes, object] = {}
    tree = _tree_for(objects, files)
    commit = Commit()
    commit.tree = tree.id
    commit.parents = [parent.encode()] if parent else []
    commit.author = commit.committer = author.line()
    commit.author_time = commit.commit_time = int(now if now is not None else time.time())
    commit.author_timezone = commit.commit_timezone = 0
    commit.encoding = b"UTF-8"
    commit.message = message.encode() + (b"" if message.endswith("\n") else b"\n")
    objects[commit.id] = commit
    store = BucketObjectStore(repo_id)
    missing = [(obj, None) for sha, obj in objects.items() if sha not in store]
    if missing:
        store.add_objects(missing)  # type: ignore[arg-type]
    return commit.id.decode()


def read_tree(repo_id: str, commit_sha: str, *, store: BucketObjectStore | None = None) -> dict:
    """``path -> bytes`` of every file at ``commit_sha``."""
    store = store or BucketObjectStore(repo_id)
    commit = store[commit_sha.encode()]
    out: dict[str, bytes] = {}

    def walk(tree_id: bytes, prefix: str) -> None:
        tree = store[tree_id]
        for entry in tree.items():  # type: ignore[attr-defined]
            path = prefix + entry.path.decode("utf-8", "replace")
            if stat.S_ISDIR(entry.mode):
                walk(entry.sha, path + "/")
            elif stat.S_ISREG(entry.mode):
                out[path] = store[entry.sha].as_raw_string()

    walk(commit.tree, "")  # type: ignore[attr-defined]
    return out


def is_ancestor(store: object, ancestor: str, descendant: str, *, limit: int = 100_000) -> bool:
    """Whether ``ancestor`` is reachable from ``descendant`` (breadth first, bounded)."""
    if ancestor == descendant:
        return True
    target = ancestor.encode()
    todo, seen = [descendant.encode()], set()
    while todo and len(seen) < limit:
        sha = todo.pop()
        if sha in seen:
            continue
        seen.add(sha)
        try:
            commit = store[sha]  # type: ignore[index]
        except KeyError:
            continue
        for parent in getattr(commit, "parents", ()):
            if parent == target:
                return True
            todo.append(parent)
    return False


def delete_repo(repo_id: str) -> int:
    """Every pack and every ref of the repo; returns how many blobs went away."""
    refs_mod.delete_all(repo_id)
    return purge_prefix(BUCKET, repo_prefix(repo_id))
