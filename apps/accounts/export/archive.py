"""Reading an ``export_account`` directory as untrusted input.

Nothing in the directory is believed until it is checked: every file (the manifest included)
must be listed in ``SHA256SUMS`` and match it, nothing unlisted may sit beside them, and the
tree may hold only plain directories and regular files whose paths stay inside it — a
symlink, a device, a FIFO, ``..`` or an absolute path refuses the import. The manifest's
``userId`` must have the shape of a stable user id (64 lowercase hex), so a platform id such
as ``system:email`` can never be named as the exported account.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from apps.accounts.export.service import SCHEMA_VERSION
from apps.accounts.importing import ImportRefused

STABLE_ID = re.compile(r"^[0-9a-f]{64}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
SUMS = "SHA256SUMS"
# A manifest or a row file this large is not an export of one account.
MAX_MANIFEST_BYTES = 16 * 1024 * 1024


@dataclass
class Archive:
    """A verified export directory: what it lists, and its manifest."""

    root: Path
    files: frozenset[str]
    manifest: dict[str, Any]
    _rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict, repr=False)

    @property
    def user_id(self) -> str:
        return self.manifest["userId"]

    def rows(self, table: str) -> list[dict[str, Any]]:
        if table not in self._rows:
            self._rows[table] = self._read_rows(table)
        return self._rows[table]

    def _read_rows(self, table: str) -> list[dict[str, Any]]:
        name = f"sections/d1_table.{table}.jsonl"
        if name not in self.files:
            return []
        rows = []
        for number, line in enumerate(_text(self._read(name), name).splitlines(), 1):
            if not line.strip():
                continue
            row = _json(line, f"{name}:{number}")
            if not isinstance(row, dict):
                raise ImportRefused(f"{name}:{number} is not a row object")
            rows.append(row)
        return rows

    def pages(self, section: str) -> list[dict[str, Any]]:
        name = f"sections/{section}.jsonl"
        if name not in self.files:
            return []
        pages = []
        for number, line in enumerate(_text(self._read(name), name).splitlines(), 1):
            page = _json(line, f"{name}:{number}") if line.strip() else {}
            if not isinstance(page, dict):
                raise ImportRefused(f"{name}:{number} is not a page object")
            if page:
                pages.append(page)
        return pages

    def blobs(self) -> list[tuple[str, str, str]]:
        """``(bucket, key as written, listed file name)`` for every file under ``blobs/``."""
        found = []
        for name in sorted(self.files):
            parts = name.split("/", 2)
            if parts[0] != "blobs":
                continue
            if len(parts) != 3 or not parts[1] or not parts[2]:
                raise ImportRefused(f"{name} is not blobs/<bucket>/<key>")
            found.append((parts[1], parts[2], name))
        return found

    def read(self, name: str) -> bytes:
        if name not in self.files:
            raise ImportRefused(f"{name} is not listed in {SUMS}")
        return self._read(name)

    def _read(self, name: str) -> bytes:
        # O_NOFOLLOW: a file swapped for a symlink after verification is not followed.
        handle = os.open(self.root / name, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(handle, "rb") as source:
            return source.read()


def open_archive(directory: Path) -> Archive:
    """Verify the tree, the checksums and the manifest; the archive if all is well."""
    if directory.is_symlink() or not directory.is_dir():
        raise ImportRefused(f"{directory} is not a directory")
    root = directory.resolve()
    present = _walk(root)
    listed = _read_sums(root)
    unlisted = sorted(present - set(listed) - {SUMS})
    if unlisted:
        raise ImportRefused(f"{unlisted[0]} is not listed in {SUMS}")
    for name, digest in sorted(listed.items()):
        if name not in present:
            raise ImportRefused(f"{name} is listed in {SUMS} but missing")
        if _sha256(root / name) != digest:
            raise ImportRefused(f"checksum mismatch for {name}")
    if "manifest.json" not in listed:
        raise ImportRefused(f"{directory} has no manifest.json listed in {SUMS}")
    if os.lstat(root / "manifest.json").st_size > MAX_MANIFEST_BYTES:
        raise ImportRefused("manifest.json is too large")
    manifest = _json(_text((root / "manifest.json").read_bytes(), "manifest.json"), "manifest.json")
    if not isinstance(manifest, dict):
        raise ImportRefused("manifest.json is not an object")
    if manifest.get("schemaVersion") != SCHEMA_VERSION:
        raise ImportRefused(
            f"export schema version {manifest.get('schemaVersion')!r} is not {SCHEMA_VERSION}"
        )
    user_id = manifest.get("userId")
    if not isinstance(user_id, str) or not STABLE_ID.match(user_id):
        raise ImportRefused(
            f"manifest userId {str(user_id)[:80]!r} is not a stable user id (64 lowercase hex)"
        )
    if not isinstance(manifest.get("sections"), list):
        raise ImportRefused("manifest.json has no sections list")
    return Archive(root, frozenset(listed), manifest)


def _walk(root: Path) -> set[str]:
    """Every regular file under ``root`` (relative, POSIX); anything else refuses."""
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in [*dirnames, *filenames]:
            path = Path(dirpath) / name
            mode = os.lstat(path).st_mode
            relative = path.relative_to(root).as_posix()
            if stat.S_ISLNK(mode):
                raise ImportRefused(f"{relative} is a symlink")
            if name in dirnames:
                if not stat.S_ISDIR(mode):
                    raise ImportRefused(f"{relative} is not a plain directory")
            elif not stat.S_ISREG(mode):
                raise ImportRefused(f"{relative} is not a regular file")
            else:
                found.add(relative)
    return found


def _read_sums(root: Path) -> dict[str, str]:
    sums = root / SUMS
    if sums.is_symlink() or not sums.is_file():
        raise ImportRefused(f"the export has no {SUMS}")
    listed: dict[str, str] = {}
    for number, line in enumerate(_text(sums.read_bytes(), SUMS).splitlines(), 1):
        if not line.strip():
            continue
        digest, sep, name = line.partition("  ")
        if not sep or not _DIGEST.match(digest):
            raise ImportRefused(f"{SUMS} line {number} is not '<sha256>  <path>'")
        _check_name(name)
        if name in listed:
            raise ImportRefused(f"{name} is listed twice in {SUMS}")
        listed[name] = digest
    return listed


def _check_name(name: str) -> None:
    path = PurePosixPath(name)
    if (
        not name
        or name == SUMS
        or path.is_absolute()
        or "\\" in name
        or "\x00" in name
        or any(part in ("", ".", "..") for part in name.split("/"))
    ):
        raise ImportRefused(f"{SUMS} names a path outside the export: {name[:200]!r}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    handle = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with os.fdopen(handle, "rb") as source:
        for chunk in iter(lambda: source.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _json(text: str, where: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ImportRefused(f"{where} is not JSON") from exc


def _text(data: bytes, where: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ImportRefused(f"{where} is not UTF-8 text") from exc
