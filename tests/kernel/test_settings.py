from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from config.env import ImproperEnv, envbool, envchoice, envint

ROOT = Path(__file__).resolve().parents[2]


def test_env_readers_fail_loudly_on_bad_values(monkeypatch):
    monkeypatch.setenv("X_BOOL", "maybe")
    monkeypatch.setenv("X_INT", "ten")
    monkeypatch.setenv("X_CHOICE", "ftp")
    with pytest.raises(ImproperEnv):
        envbool("X_BOOL", False)
    with pytest.raises(ImproperEnv):
        envint("X_INT", 1)
    with pytest.raises(ImproperEnv):
        envchoice("X_CHOICE", "filesystem", ("filesystem", "s3"))


def test_env_readers_parse_good_values(monkeypatch, tmp_path):
    monkeypatch.setenv("X_BOOL", "Yes")
    monkeypatch.setenv("X_INT", "12")
    assert envbool("X_BOOL", False) is True
    assert envint("X_INT", 1) == 12
    assert envbool("X_UNSET_BOOL", True) is True


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_check_deploy_is_clean_with_production_settings():
    result = _manage(
        "check",
        "--deploy",
        "--fail-level",
        "WARNING",
        KODY_DEBUG="0",
        KODY_SECRET_KEY="k" * 20 + "-production-secret-with-enough-entropy-0123456789",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_to_start_without_a_secret_key():
    result = _manage("check", KODY_DEBUG="0", KODY_SECRET_KEY="")
    assert result.returncode != 0
    assert "KODY_SECRET_KEY" in result.stderr


def test_the_readme_names_every_blob_storage_health_reports():
    from config.buckets import BUCKETS

    readme = (ROOT / "README.md").read_text()
    assert [name for name in BUCKETS if f"`{name}`" not in readme] == []
    assert len(BUCKETS) == 6 and "six blob storages" in readme
