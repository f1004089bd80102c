"""File-level edits of a session's working tree: read, write, batch edits, patches, restore,
tree listing and search. A batch is computed in memory against the tree as it stands and
recorded in one index call, so it lands whole or not at all."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from apps.packages.services.git import read_tree
from apps.packages.services.repo_sessions import patch as patch_mod
from apps.packages.services.repo_sessions.workspace import (
    MAX_FILE,
    FileNotInSession,
    FileTooLarge,
    Tree,
    check_path,
    directory_listing,
)
from kody.errors import InvalidInput

MAX_EDITS = 200
MAX_MATCHES = 200
MAX_QUERY = 200


class EditRefused(InvalidInput):
    code = "edit_refused"


def _encode(data: bytes) -> dict[str, Any]:
    try:
        return {"content": data.decode("utf-8"), "encoding": "utf-8", "size": len(data)}
    except UnicodeDecodeError:
        return {"content": base64.b64encode(data).decode(), "encoding": "base64", "size": len(data)}


def _decode(content: Any, encoding: str | None) -> bytes:
    if not isinstance(content, str):
        raise InvalidInput("content must be a string.", code="invalid_content")
    if len(content) > MAX_FILE * 2:  # base64 of 10 MiB is ~13.4 MiB; refuse without decoding
        raise FileTooLarge(details={"max": MAX_FILE})
    if encoding == "base64":
        try:
            return base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput("content is not valid base64.", code="invalid_content") from exc
    return content.encode("utf-8")


def read_file(user_id: str, session_id: str, path: str) -> dict[str, Any]:
    path = check_path(path)
    data = Tree(user_id, session_id, paths=[path]).read(path)
    if data is None:
        raise FileNotInSession(details={"path": path[:200]})
    return _encode(data)


def write_file(
    user_id: str, session_id: str, path: str, content: str, encoding: str | None = None
) -> dict[str, Any]:
    path = check_path(path)
    data = _decode(content, encoding)
    tree = Tree(user_id, session_id, paths=[path])
    tree.apply({path: data})
    return {"path": path, "size": len(data)}


def edit_files(user_id: str, session_id: str, edits: list[dict[str, Any]]) -> dict[str, Any]:
    if not edits or len(edits) > MAX_EDITS:
        raise InvalidInput(f"Pass 1-{MAX_EDITS} edits.", code="invalid_edits")
    tree = Tree(user_id, session_id)
    state: dict[str, bytes | None] = {}

    def current(path: str) -> bytes | None:
        return state[path] if path in state else tree.read(path)

    def existing(path: str, index: int) -> bytes:
        data = current(path)
        if data is None:
            raise EditRefused(
                f"Edit {index}: no file at {path}.", details={"index": index, "path": path[:200]}
            )
        return data

    for index, edit in enumerate(edits):
        op = edit.get("op")
        if op == "move":
            source, target = check_path(edit.get("from")), check_path(edit.get("to"))
            data = existing(source, index)
            if current(target) is not None:
                raise EditRefused(
                    f"Edit {index}: {target} already exists.",
                    details={"index": index, "path": target[:200]},
                )
            state[source], state[target] = None, data
            continue
        path = check_path(edit.get("path"))
        if op == "write":
            state[path] = _decode(edit.get("content"), edit.get("encoding"))
        elif op == "writeJson":
            if "value" not in edit:
                raise EditRefused(
                    f"Edit {index}: writeJson needs a value.", details={"index": index}
                )
            state[path] = (json.dumps(edit["value"], indent=2, ensure_ascii=False) + "\n").encode()
        elif op == "delete":
            existing(path, index)
            state[path] = None
        elif op == "replace":
            search, replace = edit.get("search"), edit.get("replace")
            if not isinstance(search, str) or not search or not isinstance(replace, str):
                raise EditRefused(
                    f"Edit {index}: replace needs search and replace strings.",
                    details={"index": index},
                )
            try:
                text = existing(path, index).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise EditRefused(
                    f"Edit {index}: {path} is not text.", details={"index": index}
                ) from exc
            found = text.count(search)
            if found != 1:
                raise EditRefused(
                    f"Edit {index}: the search text occurs {found} times in {path}; it must "
                    "occur exactly once.",
                    code="replace_not_unique" if found else "replace_not_found",
                    details={"index": index, "path": path[:200], "matches": found},
                )
            state[path] = text.replace(search, replace).encode("utf-8")
        else:
            raise EditRefused(f"Edit {index}: unknown op {op!r}.", details={"index": index})
    tree.apply(state)
    return {"applied": len(edits), "paths": sorted(state)}


def apply_patch(user_id: str, session_id: str, patch: str) -> dict[str, Any]:
    tree = Tree(user_id, session_id)
    changed = patch_mod.apply(patch, lambda path: tree.read(check_path(path)))
    tree.apply(changed)
    return {"paths": sorted(changed)}


def restore(user_id: str, session_id: str, paths: list[str] | None = None) -> dict[str, Any]:
    """Put paths (all by default) back as the session's last commit has them (its base before
    the first commit)."""
    tree = Tree(user_id, session_id)
    last = tree.session["lastCheckpointCommit"]
    target = read_tree(tree.session["sourceRepoId"], last) if last else tree.base
    if paths is None:
        wanted = set(tree.changes) | {p for p in target if target[p] != tree.base.get(p)}
    else:
        wanted = {check_path(p) for p in paths}
    tree.apply({path: target.get(path) for path in sorted(wanted)})
    return {"restored": sorted(wanted)}


def listing(user_id: str, session_id: str, path: str | None = None) -> list[dict[str, Any]]:
    return directory_listing(Tree(user_id, session_id).files(), path)


def search(user_id: str, session_id: str, query: str, regex: bool = False) -> dict[str, Any]:
    if not query or len(query) > MAX_QUERY:
        raise InvalidInput(f"A query is 1-{MAX_QUERY} characters.", code="invalid_query")
    try:
        pattern = re.compile(query if regex else re.escape(query))
    except re.error as exc:
        raise InvalidInput("The regex does not compile.", code="invalid_regex") from exc
    matches: list[dict[str, Any]] = []
    for path, data in sorted(Tree(user_id, session_id).files().items()):
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), start=1):
            if pattern.search(line):
                matches.append({"path": path, "line": number, "text": line[:500]})
                if len(matches) >= MAX_MATCHES:
                    return {"matches": matches, "truncated": True}
    return {"matches": matches, "truncated": False}
