"""Layering: the kernel reaches the accounts app only through settings (kody/callers.py), never
by import; and the apps import one another in one direction only, lower layers first.

An app may import an app listed before it in ``APP_ORDER``, never one after it, so no import
cycle between apps can come back. Every import counts: at module level, inside functions
(a deferred import is still a dependency, only a later one) and under ``TYPE_CHECKING``;
relative imports are resolved first. Migrations are left out: they are frozen history that
Django loads by app label. A name imported through ``importlib`` by string (the discovery
of ``capabilities``/``lanes`` modules, settings that name classes) is not an import here:
those are the registration seams that let a lower layer reach code above it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from kody import callers

ROOT = Path(__file__).resolve().parents[2]
KERNEL = ROOT / "kody"
APPS = ROOT / "apps"

# Lowest first. The account lifecycle sits on top: deleting, exporting and importing an
# account reads every app's data (through the surfaces each app registers with
# ``apps.accounts.surfaces``), and the account pages and capabilities show plans and usage.
# The rest of ``apps.accounts`` — users, tokens, the policy, the surfaces registry — is the
# bottom, which every app builds on.
APP_ORDER = (
    "accounts",
    "entitlements",
    "packages",
    "community",
    "jobs",
    "mailbox",
    "system_email",
    "account lifecycle",
)
LIFECYCLE = (
    "apps.accounts.campaigns",
    "apps.accounts.capabilities",
    "apps.accounts.deletion",
    "apps.accounts.export",
    "apps.accounts.home",
    "apps.accounts.lanes",
    "apps.accounts.management",
    "apps.accounts.passkey_views",
    "apps.accounts.two_factor_views",
    "apps.accounts.urls",
    "apps.accounts.views",
)


def _module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = ROOT) -> list[str]:
    """Every module ``path`` imports, anywhere in it; ``from a import b`` names ``a`` and
    ``a.b`` (``b`` may be a module), relative imports resolved against ``path``'s package."""
    names = []
    package = _module_name(path, root).split(".") if path.is_relative_to(root) else []
    if path.name != "__init__.py":
        package = package[:-1]
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                prefix = package[: len(package) - node.level + 1]
                base = ".".join([*prefix, base] if base else prefix)
            if base:
                names.append(base)
                names += [f"{base}.{alias.name}" for alias in node.names]
    return names


def layer_of(module: str) -> str | None:
    """The layer of ``APP_ORDER`` a module of ``apps`` belongs to (None outside ``apps``)."""
    parts = module.split(".")
    if parts[0] != "apps" or len(parts) < 2:
        return None
    if any(module == each or module.startswith(each + ".") for each in LIFECYCLE):
        return "account lifecycle"
    return parts[1]


def upward_imports(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Imports of an app in a layer above the importing module's."""
    offenders = []
    for path in paths:
        mine = layer_of(_module_name(path, root))
        for name in _imports(path, root):
            theirs = layer_of(name)
            if mine is None or theirs is None or theirs == mine:
                continue
            if APP_ORDER.index(theirs) > APP_ORDER.index(mine):
                where = path.relative_to(root)
                offenders.append(f"{where} ({mine}) imports {name} ({theirs})")
    return offenders


def _app_modules() -> list[Path]:
    return [path for path in sorted(APPS.rglob("*.py")) if "migrations" not in path.parts]


def test_no_kernel_module_imports_an_app() -> None:
    offenders = [
        f"{path.relative_to(KERNEL.parent)}: {name}"
        for path in sorted(KERNEL.rglob("*.py"))
        for name in _imports(path)
        if name == "apps" or name.startswith("apps.")
    ]
    assert offenders == []


def test_the_scan_would_see_an_app_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("def f():\n    from apps.accounts.models import User\n")
    assert "apps.accounts.models" in _imports(sample)


def test_apps_import_only_the_apps_below_them() -> None:
    assert upward_imports(_app_modules()) == []


def test_every_app_has_a_place_in_the_order() -> None:
    apps = {path.parent.name for path in APPS.glob("*/apps.py")}
    assert apps <= set(APP_ORDER)


def test_the_order_check_sees_deferred_and_relative_imports(tmp_path: Path) -> None:
    deferred = tmp_path / "apps" / "mailbox" / "services" / "inbound.py"
    relative = tmp_path / "apps" / "packages" / "services" / "search.py"
    below = tmp_path / "apps" / "jobs" / "lanes.py"
    for path in (deferred, relative, below):
        path.parent.mkdir(parents=True, exist_ok=True)
    deferred.write_text("def f():\n    from apps.system_email.services import inbound\n")
    relative.write_text("from ...jobs import models\n")
    below.write_text("from apps.packages.services import vector_kinds\n")
    found = upward_imports([deferred, relative, below], root=tmp_path)
    assert found == [
        "apps/mailbox/services/inbound.py (mailbox) imports apps.system_email.services"
        " (system_email)",
        "apps/mailbox/services/inbound.py (mailbox) imports apps.system_email.services.inbound"
        " (system_email)",
        "apps/packages/services/search.py (packages) imports apps.jobs (jobs)",
        "apps/packages/services/search.py (packages) imports apps.jobs.models (jobs)",
    ]


def test_settings_name_implementations_of_the_protocols() -> None:
    assert isinstance(callers.bearer_backend(), callers.BearerBackend)
    assert isinstance(callers.account_policy(), callers.AccountPolicy)
    assert callable(callers.audit_sink())


def test_a_missing_or_wrong_setting_fails_loudly(settings) -> None:  # type: ignore[no-untyped-def]
    settings.KODY_ACCOUNT_POLICY = "apps.accounts.policy.nothing_here"
    with pytest.raises(ImproperlyConfigured):
        callers.account_policy()
    settings.KODY_ACCOUNT_POLICY = "apps.accounts.policy.is_deleting"
    with pytest.raises(ImproperlyConfigured, match="does not implement"):
        callers.account_policy()
    del settings.KODY_BEARER_BACKEND
    with pytest.raises(ImproperlyConfigured):
        callers.bearer_backend()


def test_a_broken_app_module_fails_discovery_loudly(monkeypatch, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import importlib
    from types import SimpleNamespace

    from django.apps import apps

    from kody import discovery

    package = tmp_path / "brokenapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "lanes.py").write_text("raise RuntimeError('lanes.py has a bug')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    fake = SimpleNamespace(name="brokenapp", module=importlib.import_module("brokenapp"))
    monkeypatch.setattr(apps, "get_app_configs", lambda: [fake])
    monkeypatch.setattr(discovery, "_done", False)

    with pytest.raises(RuntimeError, match="lanes.py has a bug"):
        discovery.autodiscover()
    assert discovery._done is False
