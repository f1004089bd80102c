"""The codemods Kody knows: source rewrites an operator or an owner runs over many packages.

A codemod is a class with an ``id``, a ``description``, ``applies(files)`` (whether the
package's published files need it) and ``rewrite(files)`` (the new files; equal to the input
when there is nothing to do). Both take ``path -> bytes`` and never touch storage: the run
engine reads the published tree, and the rewrite reaches the package only through publish.
A codemod that needs the owner's data (their renamed packages) gets it from ``for_owner``.
"""

from __future__ import annotations

import json
import re
from typing import ClassVar

from apps.packages.services import manifest as manifest_mod
from apps.packages.services.checks import CODE_SUFFIXES
from kody.errors import NotFound


class UnknownCodemod(NotFound):
    code = "unknown_codemod"
    message = "No codemod with that id; packageCodemodList names them."


class Codemod:
    id: ClassVar[str]
    description: ClassVar[str]

    def for_owner(self, user_id: str) -> Codemod:
        """The codemod bound to one owner's data; most codemods need none."""
        return self

    def applies(self, files: dict[str, bytes]) -> bool:
        return self.rewrite(files) != files

    def rewrite(self, files: dict[str, bytes]) -> dict[str, bytes]:
        raise NotImplementedError


def _manifest(files: dict[str, bytes]) -> dict | None:
    try:
        raw = json.loads(files.get("package.json", b"").decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return raw if isinstance(raw, dict) else None


def _indent_of(text: str) -> int:
    match = re.search(r"\n( +)\"", text)
    return len(match.group(1)) if match else 2


class ExplicitCategory(Codemod):
    """Browse categories come from ``package.json#kody.category``; without one, publish infers
    it from tags, so a tag edit silently moves the package between browse shelves. This writes
    the category the package is shown under today, so the author's file says it."""

    id = "kody-category-explicit"
    description = (
        "Write package.json#kody.category with the category inferred from the tags today "
        "(examples, integrations, productivity, apps), so later tag edits do not move it."
    )

    def applies(self, files: dict[str, bytes]) -> bool:
        raw = _manifest(files)
        if raw is None or not isinstance(raw.get("kody", {}), dict):
            return False
        kody = raw.get("kody") or {}
        if kody.get("category") not in (None, "other"):
            return False
        tags = kody.get("tags", [])
        if not isinstance(tags, list):
            return False
        clean = sorted({t.strip().lower() for t in tags if isinstance(t, str) and t.strip()})
        return manifest_mod.infer_category(None, clean) != "other"

    def rewrite(self, files: dict[str, bytes]) -> dict[str, bytes]:
        if not self.applies(files):
            return files
        text = files["package.json"].decode("utf-8")
        raw = json.loads(text)
        kody = dict(raw.get("kody") or {})
        tags = sorted({t.strip().lower() for t in kody.get("tags", []) if t.strip()})
        kody["category"] = manifest_mod.infer_category(None, tags)
        raw["kody"] = kody
        out = json.dumps(raw, indent=_indent_of(text), ensure_ascii=False) + "\n"
        return {**files, "package.json": out.encode("utf-8")}


SPECIFIER_IN_CODE = re.compile(
    r"""(["'])kody:(@[a-z0-9][a-z0-9_-]*/[a-z0-9][a-z0-9._-]*)(/[A-Za-z0-9._/-]+)?\1"""
)


class FollowRenamedImports(Codemod):
    """A package's ``kody:@scope/name`` imports resolve by the imported package's current
    name, so renaming a package breaks every importer's next publish. This rewrites specifiers
    that name an old name of one of the owner's packages to its current name."""

    id = "kody-import-follow-renames"
    description = (
        "Rewrite kody:@scope/old-name imports to the imported package's current name, for "
        "packages the owner renamed (old names kept as redirects)."
    )

    def __init__(self, renames: dict[str, str] | None = None) -> None:
        self.renames = renames or {}

    def for_owner(self, user_id: str) -> Codemod:
        from apps.packages.models import PackageKodyIdRedirect, SavedPackage

        redirects = PackageKodyIdRedirect.objects.filter(user_id=user_id)
        current = dict(
            SavedPackage.objects.filter(
                user_id=user_id, id__in=[r.package_id for r in redirects]
            ).values_list("id", "name")
        )
        renames = {
            r.old_kody_id: current[r.package_id]
            for r in redirects
            if r.package_id in current and current[r.package_id] != r.old_kody_id
        }
        return FollowRenamedImports(renames)

    def rewrite(self, files: dict[str, bytes]) -> dict[str, bytes]:
        if not self.renames:
            return files
        out = dict(files)

        def swap(match: re.Match[str]) -> str:
            quote, name, sub = match.group(1), match.group(2), match.group(3) or ""
            return f"{quote}kody:{self.renames.get(name, name)}{sub}{quote}"

        for path, data in files.items():
            if not path.endswith(CODE_SUFFIXES):
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
            new = SPECIFIER_IN_CODE.sub(swap, text)
            if new != text:
                out[path] = new.encode("utf-8")
        return out


CODEMODS: dict[str, Codemod] = {c.id: c for c in (ExplicitCategory(), FollowRenamedImports())}


def get(codemod_id: str) -> Codemod:
    found = CODEMODS.get(codemod_id)
    if found is None:
        raise UnknownCodemod(details={"codemodId": codemod_id[:128]})
    return found


def listing() -> list[dict[str, str]]:
    return [{"id": c.id, "description": c.description} for c in CODEMODS.values()]
