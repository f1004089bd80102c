"""Every UserMeter call goes through ``apps/entitlements/services/`` (typed replies,
``apps.entitlements.actor.replies``); nothing else in the project names the actor to call it."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = (ROOT / "apps" / "entitlements" / "services", ROOT / "apps" / "entitlements" / "actor")


def _meter_uses(path: Path) -> list[int]:
    """Lines that import UserMeter or touch it (``UserMeter.call``, ``UserMeter(ctx)``)."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and any(a.name == "UserMeter" for a in node.names):
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id == "UserMeter":
            lines.append(node.lineno)
    return lines


def test_no_user_meter_call_outside_the_entitlements_services() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for top in ("apps", "kody")
        for path in sorted((ROOT / top).rglob("*.py"))
        if not any(path.is_relative_to(allowed) for allowed in ALLOWED)
        for line in _meter_uses(path)
    ]
    assert offenders == []


def test_the_scan_would_see_a_direct_call(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        "def f(u, day):\n    from apps.entitlements.actor import UserMeter\n"
        "    return UserMeter.call(u, 'read_day', day=day)\n"
    )
    assert _meter_uses(sample) == [2, 3]
