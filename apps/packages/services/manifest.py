"""``package.json`` of a package: the authoritative name, exports and ``kody`` metadata."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

NAME_RE = re.compile(r"^@([a-z0-9][a-z0-9_-]{0,63})/([a-z0-9][a-z0-9._-]{0,99})$")
EXPORT_KEY_RE = re.compile(r"^\.(/[A-Za-z0-9._-]+)*$")
CATEGORIES = ("integrations", "examples", "productivity", "apps", "utilities")
# Seed order for inferring a category from tags when the author gives none (or "other").
INFERRED_FROM_TAGS = ("examples", "integrations", "productivity", "apps")
MAX_TAGS = 20


class ManifestError(ValueError):
    pass


@dataclass(frozen=True)
class Manifest:
    name: str
    scope: str
    short_name: str
    exports: dict[str, str]
    description: str = ""
    category: str = "other"
    tags: list[str] = field(default_factory=list)
    jobs: dict[str, Any] = field(default_factory=dict)
    webhooks: dict[str, Any] = field(default_factory=dict)
    app: Any = None
    raw: dict[str, Any] = field(default_factory=dict)

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "exports": self.exports,
            "description": self.description,
            "category": self.category,
            "tags": self.tags,
            "jobs": self.jobs,
            "webhooks": self.webhooks,
            "app": self.app,
        }


def infer_category(author_category: Any, tags: list[str]) -> str:
    if isinstance(author_category, str) and author_category in CATEGORIES:
        return author_category
    for candidate in INFERRED_FROM_TAGS:
        if candidate in tags:
            return candidate
    return "other"


def parse_name(name: Any) -> tuple[str, str]:
    match = NAME_RE.match(name) if isinstance(name, str) else None
    if not match:
        raise ManifestError(
            'package.json "name" must be "@scope/name" in lower case, the scope being your '
            "username."
        )
    return match.group(1), match.group(2)


def _exports(value: Any, files: dict[str, bytes]) -> dict[str, str]:
    if value is None:
        value = "./index.ts"
    if isinstance(value, str):
        value = {".": value}
    if not isinstance(value, dict) or not value:
        raise ManifestError('package.json "exports" must be a path or a map of export paths.')
    out: dict[str, str] = {}
    for key, target in value.items():
        if not isinstance(key, str) or not EXPORT_KEY_RE.match(key):
            raise ManifestError(f'export key {key!r} must be "." or "./name".')
        if not isinstance(target, str) or not target.startswith("./"):
            raise ManifestError(f'export {key!r} must point at a "./" path in the package.')
        path = target[2:]
        if path not in files:
            raise ManifestError(f"export {key!r} points at {target}, which is not in the package.")
        out[key] = target
    return out


def parse(files: dict[str, bytes], manifest_path: str = "package.json") -> Manifest:
    raw_bytes = files.get(manifest_path)
    if raw_bytes is None:
        raise ManifestError(f"{manifest_path} is missing.")
    try:
        raw = json.loads(raw_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise ManifestError(f"{manifest_path} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ManifestError(f"{manifest_path} must be a JSON object.")
    scope, short = parse_name(raw.get("name"))
    kody = raw.get("kody") or {}
    if not isinstance(kody, dict):
        raise ManifestError('package.json "kody" must be an object.')
    description = kody.get("description", raw.get("description", ""))
    if not isinstance(description, str) or len(description) > 2000:
        raise ManifestError('"kody.description" must be text of at most 2,000 characters.')
    tags = kody.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) and 0 < len(t) <= 64 for t in tags):
        raise ManifestError('"kody.tags" must be a list of short strings.')
    if len(tags) > MAX_TAGS:
        raise ManifestError(f'"kody.tags" holds at most {MAX_TAGS} tags.')
    category = kody.get("category")
    if category is not None and category not in (*CATEGORIES, "other"):
        raise ManifestError(f'"kody.category" must be one of {", ".join((*CATEGORIES, "other"))}.')
    for key in ("jobs", "webhooks"):
        if not isinstance(kody.get(key, {}), dict):
            raise ManifestError(f'"kody.{key}" must be an object keyed by name.')
    clean_tags = sorted({t.strip().lower() for t in tags if t.strip()})
    return Manifest(
        name=f"@{scope}/{short}",
        scope=scope,
        short_name=short,
        exports=_exports(raw.get("exports"), files),
        description=description.strip(),
        category=infer_category(category, clean_tags),
        tags=clean_tags,
        jobs=dict(kody.get("jobs", {})),
        webhooks=dict(kody.get("webhooks", {})),
        app=kody.get("app"),
        raw=raw,
    )
