"""The kernel reaches the accounts app only through settings (kody/callers.py), never by import."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from kody import callers

KERNEL = Path(__file__).resolve().parents[2] / "kody"


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


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
