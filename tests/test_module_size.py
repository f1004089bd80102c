"""Every module fits in a head: no Python file of the project is over ``LINE_BUDGET`` lines.

A module that grows past the budget is split by concept (what it does, not where line 500
falls), with its callers updated. Migrations are left out: they are generated, frozen history.
The actor hot path has a budget of its own as a whole, however its modules are cut: the two
paths, what they share and the statement sender stay readable in one sitting.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE_BUDGET = 500
SCANNED = ("apps", "benchmarks", "config", "kody", "scripts", "tests", "manage.py")
SKIPPED_DIRS = {"migrations", "__pycache__", "node_modules", ".venv", "var"}

HOT_PATH_BUDGET = 1100
HOT_PATH = (
    "kody/actors/runtime.py",
    "kody/actors/one_statement_path.py",
    "kody/actors/plain_path.py",
    "kody/actors/batch.py",
    "kody/actors/records.py",
    "kody/userschema/scope.py",
)


def _lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def project_modules() -> list[Path]:
    found = []
    for name in SCANNED:
        top = ROOT / name
        candidates = [top] if top.is_file() else top.rglob("*.py")
        for path in candidates:
            if not SKIPPED_DIRS.intersection(path.relative_to(ROOT).parts):
                found.append(path)
    return sorted(found)


def test_the_scan_sees_the_project():
    seen = {path.relative_to(ROOT).as_posix() for path in project_modules()}
    assert {"kody/actors/runtime.py", "apps/accounts/surfaces.py", "manage.py"} <= seen
    assert not any("/migrations/" in path for path in seen)


def test_no_module_is_over_the_line_budget():
    over = {
        path.relative_to(ROOT).as_posix(): lines
        for path in project_modules()
        if (lines := _lines(path)) > LINE_BUDGET
    }
    assert over == {}, (
        f"modules over {LINE_BUDGET} lines (split each by concept, callers updated): {over}"
    )


def test_the_actor_hot_path_stays_within_its_budget():
    sizes = {name: _lines(ROOT / name) for name in HOT_PATH}
    assert sum(sizes.values()) <= HOT_PATH_BUDGET, sizes
