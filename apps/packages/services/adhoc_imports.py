"""Static ``kody:@scope/name/export`` imports in ad hoc ``execute`` code.

Ad hoc code has no publish, so nothing was pinned for it: each static import resolves, when
the code runs, in the caller's own account to the export's bundle at that package's current
published commit — the same artifact an invocation token runs, never a live checkout. The
rules are the publish check's: only ``kody:@scope/name[/export]`` specifiers, only packages the
caller owns (a person forks another account's package, a platform package included, into
their own account before importing it), and never a dynamic ``import("kody:@…")``. The
specifier is replaced by a ``data:`` URL of the bundle, so the sandbox needs no loader and no
permission to import it. An import that does not resolve answers the same error whether or
not another account has a package of that name.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from apps.packages.models import EntitySource, PublishedBundleArtifact, SavedPackage
from apps.packages.services.checks import DYNAMIC_KODY_IMPORT, SPECIFIER, STATIC_KODY_IMPORT
from kody.kv import store as kv
from kody.sandbox.pool import ExecuteError

MAX_IMPORTS = 20
DYNAMIC_TEACHING = (
    'import("kody:@…") is not supported: import the package statically at the top of an ES '
    'module (`import { x } from "kody:@scope/name/export"` and `export default async () => …`), '
    "or use import(specifier) for non-package modules."
)


@dataclass(frozen=True)
class Resolved:
    specifier: str
    package_id: str
    published_commit: str


def resolve(user_id: str, code: str) -> tuple[str, list[Resolved]]:
    """``code`` with every static ``kody:@`` specifier replaced by its bundle, and what each
    resolved to; raises ``ExecuteError`` (``ImportError``) for anything that does not."""
    if DYNAMIC_KODY_IMPORT.search(code):
        raise ExecuteError(DYNAMIC_TEACHING, details={"name": "ImportError"})
    spans: list[tuple[int, int, str]] = []
    for match in STATIC_KODY_IMPORT.finditer(code):
        group = 1 if match.group(1) is not None else 2
        spans.append((match.start(group), match.end(group), match.group(group)))
    if not spans:
        return code, []
    if len({spec for _, _, spec in spans}) > MAX_IMPORTS:
        raise ExecuteError(
            f"Ad hoc code may import at most {MAX_IMPORTS} kody:@ packages.",
            details={"name": "ImportError"},
        )
    urls: dict[str, str] = {}
    resolved: list[Resolved] = []
    for _, _, spec in spans:
        if spec not in urls:
            bundle, found = _bundle(user_id, spec)
            urls[spec] = "data:application/javascript;base64," + base64.b64encode(
                bundle.encode("utf-8")
            ).decode("ascii")
            resolved.append(found)
    out = code
    for start, end, spec in sorted(spans, reverse=True):
        out = out[:start] + urls[spec] + out[end:]
    return out, resolved


def _bundle(user_id: str, spec: str) -> tuple[str, Resolved]:
    parsed = SPECIFIER.match(spec)
    if not parsed:
        raise ExecuteError(
            f"{spec[:200]} is not a kody:@scope/name[/export] specifier.",
            details={"name": "ImportError", "specifier": spec[:200]},
        )
    scope, name, sub = parsed.groups()
    export = "." + (sub or "")
    package = SavedPackage.objects.filter(user_id=user_id, name=f"@{scope}/{name}").first()
    source = (
        EntitySource.objects.filter(user_id=user_id, id=package.source_id).first()
        if package is not None and package.source_id
        else None
    )
    row = (
        PublishedBundleArtifact.objects.filter(
            user_id=user_id,
            source_id=source.id,
            artifact_kind="export",
            artifact_name=export,
            published_commit=source.published_commit,
        ).first()
        if source is not None and source.published_commit
        else None
    )
    data = kv.get(row.kv_key) if row is not None else None
    if package is None or source is None or row is None or data is None:
        # One answer for "no such package", "another account's" and "no such export".
        raise ExecuteError(
            f"{spec}: no published package @{scope}/{name} with export {export!r} in your "
            "account. Imports resolve in your own account only: to use another account's "
            "package (a platform package too), fork it into your account and import the fork.",
            details={"name": "ImportError", "specifier": spec},
        )
    return data.decode("utf-8"), Resolved(spec, package.id, source.published_commit)
