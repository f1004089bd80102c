"""``scripts/test`` stops the embedded servers the suite started, and only those.

It asks ``python -m kody.embedded status`` before pytest and runs ``stop-started --before``
after it. These tests drive both against a Redis of their own under a temporary var
directory (a Postgres would take a data directory's initdb; it goes down the same code).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kody import embedded


@pytest.fixture
def var(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("KODY_VAR_DIR", str(tmp_path))
    yield tmp_path
    embedded.stop_redis(tmp_path / "redis")


def test_a_server_the_run_started_is_stopped_and_one_already_up_is_kept(var: Path) -> None:
    assert embedded.running(var) == set()
    embedded.start_redis(var / "redis")
    assert embedded.running(var) == {"redis"}

    # Up before the run (a `./scripts/up` beside the suite): kept.
    assert embedded.stop_started({"redis"}, var) == []
    assert embedded.running(var) == {"redis"}

    # Started by the run: stopped, and its process is gone.
    pid = embedded.redis_pid(var / "redis")
    assert embedded.stop_started(set(), var) == ["redis"]
    assert embedded.running(var) == set()
    assert not embedded.alive(pid)


def test_the_command_line_reports_and_stops_what_it_was_told(
    var: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert embedded.main(["status"]) == 0
    assert capsys.readouterr().out == "\n"  # nothing up

    embedded.start_redis(var / "redis")
    assert embedded.main(["status"]) == 0
    before = capsys.readouterr().out.strip()
    assert before == "redis"

    assert embedded.main(["stop-started", "--before", before]) == 0
    assert capsys.readouterr().out == ""
    assert embedded.running(var) == {"redis"}

    assert embedded.main(["stop-started", "--before", ""]) == 0
    assert capsys.readouterr().out == "stopped the embedded redis this run started\n"
    assert embedded.running(var) == set()


def test_an_unknown_name_is_refused_and_stops_nothing(var: Path) -> None:
    embedded.start_redis(var / "redis")
    with pytest.raises(SystemExit) as refused:
        embedded.main(["stop-started", "--before", "postgres mysql"])
    assert refused.value.code == 2
    assert embedded.running(var) == {"redis"}
