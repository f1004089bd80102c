"""The code base stays ruff-clean and ruff-formatted, and the kernel (``kody/``) type-checks
under mypy (rules for both in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True
    )


def test_ruff_check_passes():
    result = _ruff("check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_format_is_applied():
    result = _ruff("format", "--check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_passes_over_the_kernel():
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-incremental"],  # the files: pyproject's [tool.mypy]
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_environment_or_machine_local_path_is_tracked():
    """A committed ``.venv``/``var`` (or a link out of the checkout) breaks every other clone."""
    tracked = subprocess.run(
        ["git", "ls-files", "-s"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    bad = []
    for entry in tracked:
        mode, _, _, path = entry.split(None, 3)
        top = path.split("/", 1)[0]
        if top in {".venv", "var", "test-artifacts"} or mode == "120000":
            bad.append(path)
    assert not bad, f"tracked environment files or symlinks: {bad}"
