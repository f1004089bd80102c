"""The repo_session_cleanup lane: an idle session goes after 30 minutes, an edited one after
7 days, each with its blobs, rows, inventory row and hint; the retired backfill lane parses
and does nothing."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest
from django.core.management import call_command

from apps.packages.actor.index import BUCKET
from apps.packages.models import RepoSessionDueOwner, SourceRepoRef, UserStorageBucket
from kody import blobs
from kody.lanes import Cadence, all_lanes
from tests.packages.factories import package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def spilled(session_id: str) -> list[str]:
    return list(blobs.list_prefix(BUCKET, blobs.repo_session_prefix(session_id)))


def test_the_lanes_are_registered():
    lanes = {x.name: x for x in all_lanes()}
    cleanup = lanes["repo_session_cleanup"]
    assert (cleanup.cadence, cleanup.batch_size) == (Cadence.EVERY_TICK, 100)
    assert lanes["repo_session_index_backfill"].retired


def test_idle_and_edited_sessions_are_removed_leaving_nothing(
    as_owner, owner, frozen_clock, caplog
):
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    idle = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    edited = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    as_owner.call("repoWriteFile", sessionId=edited, path="big.txt", content="ab" * 1024 * 1024)
    as_owner.call("repoCommit", sessionId=edited, message="Big")
    assert len(spilled(edited)) == 1
    assert RepoSessionDueOwner.objects.filter(user_id=owner.stable_user_id).exists()

    frozen_clock.shift(timedelta(minutes=29))
    call_command("run_lane", "repo_session_cleanup")
    assert len(as_owner.call("repoListSessions")["sessions"]) == 2

    frozen_clock.shift(timedelta(minutes=2))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        call_command("run_lane", "repo_session_cleanup")
    lines = [
        r.getMessage() for r in caplog.records if "lane=repo_session_cleanup" in r.getMessage()
    ]
    assert len(lines) == 1 and "status=ok" in lines[0] and "sessions_removed=1" in lines[0]
    assert [s["id"] for s in as_owner.call("repoListSessions")["sessions"]] == [edited]
    error = as_owner.error("repoGetSession", 404, sessionId=idle)
    assert error["code"] == "repo_session_not_found"

    frozen_clock.shift(timedelta(days=7))
    call_command("run_lane", "repo_session_cleanup")
    assert as_owner.call("repoListSessions")["sessions"] == []
    assert spilled(edited) == []
    assert not RepoSessionDueOwner.objects.exists()
    # (the package's published source keeps its own "source" row)
    assert not UserStorageBucket.objects.filter(
        user_id=owner.stable_user_id, kind="repo_session"
    ).exists()
    assert not SourceRepoRef.objects.filter(name__startswith="refs/heads/kody-session/").exists()


def test_a_failed_blob_delete_keeps_the_row_for_the_next_tick(
    as_owner, owner, frozen_clock, monkeypatch
):
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    sid = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    as_owner.call("repoWriteFile", sessionId=sid, path="big.txt", content="ab" * 1024 * 1024)
    frozen_clock.shift(timedelta(days=8))

    def broken(*args, **kwargs):
        raise OSError("bucket unavailable")

    monkeypatch.setattr("apps.packages.actor.index.blobs.purge_prefix", broken)
    call_command("run_lane", "repo_session_cleanup")
    assert [s["id"] for s in as_owner.call("repoListSessions")["sessions"]] == [sid]
    assert len(spilled(sid)) == 1
    monkeypatch.undo()
    frozen_clock.shift(timedelta(minutes=6))
    call_command("run_lane", "repo_session_cleanup")
    assert as_owner.call("repoListSessions")["sessions"] == []
    assert spilled(sid) == []


def test_the_retired_backfill_lane_parses_and_does_nothing(as_owner, owner):
    package = as_owner.call("packageSave", files=package_files(owner.username))["package"]
    sid = as_owner.call("repoOpenSession", packageId=package["id"])["session"]["id"]
    run = call_command("run_lane", "repo_session_index_backfill")
    assert run is None
    assert [s["id"] for s in as_owner.call("repoListSessions")["sessions"]] == [sid]
