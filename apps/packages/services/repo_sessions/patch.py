"""Applying a unified diff to a working tree, all hunks or none.

A hunk applies where its old lines match the file exactly: at the line its header names, or
(like ``git apply``) at the nearest offset where the same lines occur. A hunk that matches
nowhere refuses the whole patch and is named in the error (file and header).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from kody.errors import KodyError

HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
MAX_PATCH = 5 * 1024 * 1024


class PatchRejected(KodyError):
    code = "patch_rejected"
    status = 422
    message = "The patch does not apply; nothing was changed."


@dataclass
class Hunk:
    header: str
    old_start: int
    lines: list[str] = field(default_factory=list)  # each with its ' ', '-' or '+' marker


@dataclass
class FilePatch:
    old: str | None  # None: /dev/null (a new file)
    new: str | None  # None: /dev/null (a deletion)
    hunks: list[Hunk] = field(default_factory=list)


def _name(raw: str) -> str | None:
    name = raw.split("\t", 1)[0].strip()
    if name == "/dev/null":
        return None
    if name.startswith(("a/", "b/")):
        name = name[2:]
    return name


def parse(text: str) -> list[FilePatch]:
    if len(text.encode()) > MAX_PATCH:
        raise PatchRejected("A patch is at most 5 MiB.")
    patches: list[FilePatch] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("--- ") and i + 1 < len(lines) and lines[i + 1].startswith("+++ "):
            patches.append(FilePatch(_name(line[4:]), _name(lines[i + 1][4:])))
            i += 2
            continue
        match = HUNK.match(line)
        if match:
            if not patches:
                raise PatchRejected("A hunk comes before any file header.")
            hunk = Hunk(line, int(match.group(1)))
            old_left = int(match.group(2) or 1)
            new_left = int(match.group(4) or 1)
            i += 1
            while i < len(lines) and (old_left > 0 or new_left > 0):
                body = lines[i]
                if body.startswith("\\"):  # "\ No newline at end of file"
                    i += 1
                    continue
                marker = body[:1] or " "
                if marker not in " -+":
                    break
                hunk.lines.append(marker + body[1:])
                old_left -= marker in " -"
                new_left -= marker in " +"
                i += 1
            if old_left > 0 or new_left > 0:
                raise PatchRejected(
                    "A hunk is shorter than its header says.",
                    details={"hunk": hunk.header, "path": patches[-1].new or patches[-1].old},
                )
            patches[-1].hunks.append(hunk)
            continue
        i += 1
    if not patches:
        raise PatchRejected("No file changes found in the patch (expected a unified diff).")
    return patches


def _apply_hunks(path: str, text: str, hunks: list[Hunk]) -> str:
    ends_newline = text.endswith("\n") or not text
    lines = text.splitlines()
    offset = 0
    for hunk in hunks:
        old = [h[1:] for h in hunk.lines if h[0] in " -"]
        new = [h[1:] for h in hunk.lines if h[0] in " +"]
        want = max(hunk.old_start - 1, 0) + offset if old else hunk.old_start + offset
        found = None
        for delta in sorted(range(-len(lines) - 1, len(lines) + 2), key=abs):
            at = want + delta
            if 0 <= at <= len(lines) - len(old) and lines[at : at + len(old)] == old:
                found = at
                break
        if found is None:
            raise PatchRejected(
                f"Hunk {hunk.header} does not apply to {path}; nothing was changed.",
                details={"path": path, "hunk": hunk.header},
            )
        lines[found : found + len(old)] = new
        offset += len(new) - len(old)
    return "\n".join(lines) + ("\n" if lines and ends_newline else "")


def apply(text: str, read: Callable[[str], bytes | None]) -> dict[str, bytes | None]:
    """``path -> new bytes | None`` for every file the patch touches; raises before returning
    anything if one hunk fails."""
    out: dict[str, bytes | None] = {}

    def current(path: str) -> bytes | None:
        return out[path] if path in out else read(path)

    for patch in parse(text):
        target = patch.new or patch.old
        assert target is not None
        if patch.old is None:
            if current(target) is not None:
                raise PatchRejected(f"{target} already exists.", details={"path": target})
            before = ""
        else:
            data = current(patch.old)
            if data is None:
                raise PatchRejected(f"{patch.old} does not exist.", details={"path": patch.old})
            try:
                before = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise PatchRejected(
                    "Binary files cannot be patched.", details={"path": patch.old}
                ) from exc
        after = _apply_hunks(target, before, patch.hunks)
        if patch.new is None:
            if after.strip():
                raise PatchRejected(
                    f"Deleting {target} leaves content behind.", details={"path": target}
                )
            out[target] = None
            continue
        if patch.old is not None and patch.old != patch.new:
            out[patch.old] = None
        out[patch.new] = after.encode("utf-8")
    return out
