"""``manage.py export_account EMAIL --out DIR``: a complete, checksummed export on disk.

Layout of DIR (created; must be empty or absent)::

    manifest.json                 the manifest (accountExportManifest)
    sections/d1_table.<table>.jsonl   one JSON object per row
    sections/<actor section>.jsonl    one JSON object per page of the actor's export
    blobs/<bucket>/<key>          the bytes of every stored object, reassembled from chunks
    repos/<sourceId>.bundle       a git bundle of every repo (``git clone`` reads it)
    SHA256SUMS                    sha256 of every file above, ``sha256sum -c`` compatible

It pages through exactly what the capabilities serve (same cursors, same redaction), so a
command export and an agent's export cannot differ.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from apps.accounts.export import service
from apps.accounts.models import User
from kody.errors import KodyError


class Command(BaseCommand):
    help = "Write a complete export of one account (manifest, sections, blobs, checksums)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("email")
        parser.add_argument("--out", required=True, help="a new or empty directory")
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: Any, **options: Any) -> None:
        user = User.objects.filter(email__iexact=options["email"].strip()).first()
        if user is None:
            raise CommandError(f"no account with email {options['email']!r}")
        out = Path(options["out"])
        if out.exists() and any(out.iterdir()):
            raise CommandError(f"{out} is not empty; export into a new directory")
        (out / "sections").mkdir(parents=True, exist_ok=True)
        try:
            manifest = service.manifest(user)
            _write_json(out / "manifest.json", manifest)
            sections = manifest["sections"]
            progress = tqdm(
                total=len(sections),
                unit="section",
                disable=options["no_progress"],
                file=self.stderr._out,
            )
            rows = 0
            objects = 0
            for entry in sections:
                name = entry["section"]
                progress.set_description(entry.get("table") or name)
                if name == "d1_table":
                    rows += self._table(user, entry["table"], out)
                elif name == "r2_object":
                    objects += self._blobs(user, out)
                elif name == "artifact_repos":
                    self._repos(user, out)
                else:
                    self._actor(user, name, out)
                progress.update(1)
            progress.close()
        except KodyError as exc:
            raise CommandError(f"export failed: {exc.code}: {exc.message}") from None
        files = _write_checksums(out)
        self.stdout.write(
            f"exported {user.email}: {len(sections)} sections, {rows} rows, "
            f"{objects} objects, {files} files to {out}"
        )

    def _table(self, user: User, table: str, out: Path) -> int:
        count = 0
        with open(out / "sections" / f"d1_table.{table}.jsonl", "w") as handle:
            for page in _pages(user, "d1_table", table=table):
                for row in page["rows"]:
                    handle.write(json.dumps(row, sort_keys=True) + "\n")
                    count += 1
        return count

    def _actor(self, user: User, section: str, out: Path) -> None:
        with open(out / "sections" / f"{section}.jsonl", "w") as handle:
            for page in _pages(user, section):
                handle.write(json.dumps(page["page"], sort_keys=True) + "\n")

    def _repos(self, user: User, out: Path) -> None:
        """The pointers, and one git bundle per repo with refs (full history, importable)."""
        from apps.packages.services.git.bundles import export_bundle

        with open(out / "sections" / "artifact_repos.jsonl", "w") as handle:
            for page in _pages(user, "artifact_repos"):
                for row in page["rows"]:
                    handle.write(json.dumps(row, sort_keys=True) + "\n")
                    if row["bundle"]:
                        (out / "repos").mkdir(exist_ok=True)
                        export_bundle(row["repoId"], out / row["bundle"])

    def _blobs(self, user: User, out: Path) -> int:
        objects = 0
        handle = None
        for page in _pages(user, "r2_object"):
            obj = page["object"]
            if obj is None:
                break
            if obj.get("missing"):
                self.stderr.write(f"warning: {obj['bucket']}/{obj['key']} is missing")
                continue
            path = out / "blobs" / obj["bucket"] / obj["key"]
            if obj["offset"] == 0:
                path.parent.mkdir(parents=True, exist_ok=True)
                handle = open(path, "wb")  # noqa: SIM115 - closed on the final chunk
            assert handle is not None
            handle.write(base64.b64decode(obj["chunk"]))
            if obj["final"]:
                handle.close()
                handle = None
                objects += 1
        return objects


def _pages(user: User, section: str, table: str | None = None):  # type: ignore[no-untyped-def]
    cursor = None
    while True:
        page = service.section(user, section, table=table, cursor=cursor, limit=service.PAGE_MAX)
        yield page
        cursor = page["nextCursor"]
        if not cursor:
            return


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")


def _write_checksums(out: Path) -> int:
    lines = []
    for root, _dirs, files in os.walk(out):
        for filename in sorted(files):
            path = Path(root) / filename
            if path.name == "SHA256SUMS":
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            lines.append(f"{digest}  {path.relative_to(out).as_posix()}")
    (out / "SHA256SUMS").write_text("\n".join(sorted(lines, key=lambda line: line[66:])) + "\n")
    return len(lines)
