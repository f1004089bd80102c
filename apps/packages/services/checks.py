"""Publish checks, run on a commit's files before anything changes (seed 000's
``runRepoChecks``): manifest, docs, ``kody:@`` imports, type check, lint, bundle.

Type check, lint and bundle run the ``deno`` binary from its PyPI wheel in a scratch folder; a
``kody:@scope/name/export`` import resolves, through a generated import map, to the published
snapshot of that package in the caller's scope, so the check sees what will be pinned.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings

from apps.packages.models import EntitySource, SavedPackage
from apps.packages.services import manifest as manifest_mod
from apps.packages.services import scope_grants
from kody.kv import keys as kv_keys
from kody.kv import store as kv

CODE_SUFFIXES = (".ts", ".tsx", ".js", ".jsx", ".mts", ".mjs")
DYNAMIC_KODY_IMPORT = re.compile(r"""import\s*\(\s*["'`]kody:@""")
STATIC_KODY_IMPORT = re.compile(
    r"""(?:^|[;\s])(?:import|export)\s[^;]*?from\s*["'](kody:@[^"']+)["']"""
    r"""|(?:^|[;\s])import\s*["'](kody:@[^"']+)["']""",
    re.MULTILINE,
)
SPECIFIER = re.compile(r"^kody:@([a-z0-9][a-z0-9_-]*)/([a-z0-9][a-z0-9._-]*)(/[A-Za-z0-9._/-]+)?$")
DENO_TIMEOUT = 120
RUNTIME_STUB = "export const runtime: any = {};\nexport default runtime;\n"


@dataclass
class CheckReport:
    checks: list[dict[str, Any]] = field(default_factory=list)
    manifest: manifest_mod.Manifest | None = None
    dependencies: list[dict[str, Any]] = field(default_factory=list)
    bundles: dict[str, str] = field(default_factory=dict)  # export key -> bundled JS

    @property
    def ok(self) -> bool:
        return all(c["ok"] for c in self.checks)

    def add(self, name: str, ok: bool, message: str = "") -> None:
        self.checks.append({"name": name, "ok": ok, "message": message})

    def failed(self) -> list[dict[str, Any]]:
        return [c for c in self.checks if not c["ok"]]


def deno_bin() -> str:
    from deno import find_deno_bin

    return find_deno_bin()


def run_checks(
    owner_user_id: str, username: str, files: dict[str, bytes], *, package_id: str | None = None
) -> CheckReport:
    report = CheckReport()
    try:
        report.manifest = manifest_mod.parse(files)
        scope = report.manifest.scope
        # A platform account's scope is judged by the publish itself (its grants); any other
        # scope but the person's own username is wrong.
        if scope != username.lower() and scope_grants.platform_scope_owner(scope) is None:
            raise manifest_mod.ManifestError(
                f'The package scope must be your username: "@{username.lower()}/…".'
            )
        report.add("manifest", True)
    except manifest_mod.ManifestError as exc:
        report.manifest = None
        report.add("manifest", False, str(exc))
    if "README.md" in files:
        report.add("docs", True)
    else:
        report.add("docs", False, "README.md is missing: say what the package does and how.")
    deps, problems = _imports(owner_user_id, files, package_id)
    report.dependencies = deps
    report.add("imports", not problems, " ".join(problems))
    if report.ok and report.manifest is not None:
        _deno(report, files, deps)
    return report


def _code_files(files: dict[str, bytes]) -> dict[str, str]:
    out = {}
    for path, data in files.items():
        if path.endswith(CODE_SUFFIXES):
            out[path] = data.decode("utf-8", "replace")
    return out


def _imports(
    user_id: str, files: dict[str, bytes], package_id: str | None
) -> tuple[list[dict[str, Any]], list[str]]:
    problems: list[str] = []
    wanted: dict[str, tuple[str, str, str]] = {}
    for path, text in _code_files(files).items():
        if DYNAMIC_KODY_IMPORT.search(text):
            problems.append(
                f'{path}: import("kody:@…") is not supported; use a static '
                '`import { x } from "kody:@scope/name"` at the top of the module (or '
                "import(specifier) for non-package modules)."
            )
        for match in STATIC_KODY_IMPORT.finditer(text):
            spec = match.group(1) or match.group(2)
            parsed = SPECIFIER.match(spec)
            if not parsed:
                problems.append(f"{path}: {spec} is not a kody:@scope/name[/export] specifier.")
                continue
            scope, name, sub = parsed.groups()
            wanted[spec] = (scope, name, "." + (sub or ""))
    deps = []
    for spec, (scope, name, export) in sorted(wanted.items()):
        target = SavedPackage.objects.filter(user_id=user_id, name=f"@{scope}/{name}").first()
        source = (
            EntitySource.objects.filter(user_id=user_id, id=target.source_id).first()
            if target
            else None
        )
        if target is None or source is None or not source.published_commit:
            problems.append(f"{spec}: no published package @{scope}/{name} in your account.")
            continue
        if target.id == package_id:
            problems.append(f"{spec}: a package cannot import itself.")
            continue
        snapshot = kv.get_json(kv_keys.source_manifest_snapshot(source.id, source.published_commit))
        exports = (snapshot or {}).get("exports", {})
        if export not in exports:
            problems.append(f"{spec}: @{scope}/{name} has no export {export!r}.")
            continue
        deps.append(
            {
                "specifier": spec,
                "packageId": target.id,
                "sourceId": source.id,
                "publishedCommit": source.published_commit,
                "export": export,
                "entry": exports[export],
            }
        )
    return deps, problems


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for path, data in files.items():
        if path.startswith("/") or ".." in path.split("/"):
            continue
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)


def _deno_env() -> dict[str, str]:
    cache = Path(settings.VAR_DIR) / "cache" / "deno"
    cache.mkdir(parents=True, exist_ok=True)
    # The rest of the environment passes through: ``deno bundle`` fetches its esbuild once
    # from the npm registry (then cached in DENO_DIR) and needs the machine's proxy and CAs.
    return {
        **os.environ,
        "DENO_DIR": str(cache),
        "DENO_NO_UPDATE_CHECK": "1",
        "NO_COLOR": "1",
    }


def _run(args: list[str], cwd: Path) -> tuple[bool, str]:
    try:
        done = subprocess.run(
            [deno_bin(), *args],
            cwd=cwd,
            env=_deno_env(),
            capture_output=True,
            text=True,
            timeout=DENO_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return False, f"deno {args[0]} took over {DENO_TIMEOUT} s"
    output = (done.stdout + done.stderr).replace(str(cwd) + "/", "")
    return done.returncode == 0, output.strip()[-4000:]


def _deno(report: CheckReport, files: dict[str, bytes], deps: list[dict[str, Any]]) -> None:
    manifest = report.manifest
    assert manifest is not None
    code = [p for p in files if p.endswith(CODE_SUFFIXES)]
    if not code:
        for name in ("typecheck", "lint", "bundle"):
            report.add(name, True, "no code files")
        return
    with tempfile.TemporaryDirectory(prefix="kody-checks-") as tmp:
        root = Path(tmp) / "pkg"
        _write_tree(root, files)
        imports = {"capabilities:runtime": "./.kody_deps/runtime.ts"}
        (root / ".kody_deps").mkdir(exist_ok=True)
        (root / ".kody_deps" / "runtime.ts").write_text(RUNTIME_STUB)
        for dep in deps:
            snapshot = kv.get_json(kv_keys.source_snapshot(dep["sourceId"], dep["publishedCommit"]))
            folder = f".kody_deps/{dep['packageId']}"
            _write_tree(
                root / folder, {p: t.encode() for p, t in (snapshot or {}).get("files", {}).items()}
            )
            imports[dep["specifier"]] = f"./{folder}/{dep['entry'][2:]}"
        (root / "kody.deno.json").write_text(json.dumps({"imports": imports, "lock": False}))
        config = ["--config", "kody.deno.json"]
        # Package source never makes the server fetch URLs: https: imports fail the check.
        remote = ["--no-remote"]
        entries = [t[2:] for t in manifest.exports.values() if t.endswith(CODE_SUFFIXES)]
        ok, out = _run(["check", *remote, *config, *entries], root) if entries else (True, "")
        report.add("typecheck", ok, "" if ok else out)
        ok, out = _run(["lint", *config, *code], root)
        report.add("lint", ok, "" if ok else out)
        if not report.ok:
            return
        for key, target in manifest.exports.items():
            if not target.endswith(CODE_SUFFIXES):
                continue
            out_file = Path(tmp) / "bundle.js"
            ok, out = _run(["bundle", *remote, *config, target[2:], "-o", str(out_file)], root)
            if not ok:
                report.add("bundle", False, f"export {key}: {out}")
                return
            report.bundles[key] = out_file.read_text()
        report.add("bundle", True)
