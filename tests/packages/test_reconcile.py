"""The reconcile_artifacts_pushes lane: pushes nobody published get published, only for
pending sources, at a five-minute cadence, within budget; at 03:00 UTC a backstop over every
package source that also drops expired repo tokens."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from apps.packages.models import EntitySource, RepoToken
from apps.packages.services import packages, reconcile, repo_tokens
from apps.packages.services.git import Author, commit_files, head, move_refs, read_tree
from apps.packages.services.git.refs import HEAD_REF
from kody.lanes import LaneRun, registry, run_lane
from tests.packages.test_packages import files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
NOON = datetime(2031, 3, 14, 12, 0, tzinfo=UTC)


def pushed(source: EntitySource, body: str) -> str:
    """What a git push does: a new commit on main (objects, then the ref)."""
    parent = head(source.repo_id)
    tree = read_tree(source.repo_id, parent)
    tree["mod.ts"] = body.encode()
    sha = commit_files(
        source.repo_id, tree, parent=parent, message="push", author=Author("a", "a@b")
    )
    move_refs(source.repo_id, [(HEAD_REF, parent, sha)])
    return sha


GOOD = "export function greet(name: string): string {\n  return `yo ${name}`;\n}\n"
BAD = 'export const x: number = "text";\n'


def package(owner, name="greeter") -> EntitySource:
    saved = packages.save(owner, files(name=name))
    return EntitySource.objects.get(id=saved["package"]["sourceId"])


def test_the_lane_is_registered_every_tick():
    lane = registry.get("reconcile_artifacts_pushes")
    assert lane is not None and lane.cadence == registry.Cadence.EVERY_TICK


def test_a_pending_push_is_published_and_a_dormant_one_is_left_alone(owner, frozen_clock, caplog):
    frozen_clock.move_to(NOON)
    pending, dormant = package(owner, "one"), package(owner, "two")
    repo_tokens.mint(pending, "write")
    new = pushed(pending, GOOD)
    pushed(dormant, GOOD)
    dormant_before = EntitySource.objects.get(id=dormant.id).published_commit

    frozen_clock.move_to(NOON + timedelta(minutes=5))  # the save's publish was a check too
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run_lane("reconcile_artifacts_pushes")
    pending.refresh_from_db()
    assert pending.published_commit == new and pending.external_check_until is None
    assert EntitySource.objects.get(id=dormant.id).published_commit == dormant_before
    line = [r.message for r in caplog.records if "reconcile_artifacts_pushes" in r.message][-1]
    assert "published=1" in line and "status=ok" in line


def test_an_unchanged_head_only_advances_the_check_and_settles_after_the_horizon(
    owner, frozen_clock
):
    frozen_clock.move_to(NOON)
    source = package(owner)
    token, _ = repo_tokens.mint(source, "write")
    later = NOON + timedelta(minutes=5)
    frozen_clock.move_to(later)
    run_lane("reconcile_artifacts_pushes")
    source.refresh_from_db()
    assert source.last_external_check_at == later
    assert source.external_check_until == token.expires_at + timedelta(hours=1)

    frozen_clock.move_to(later + timedelta(minutes=2))  # within the cadence: not looked at
    assert not reconcile.due_sources(timezone.now(), backstop=False).filter(id=source.id).exists()
    frozen_clock.move_to(later + timedelta(minutes=5))
    assert reconcile.due_sources(timezone.now(), backstop=False).filter(id=source.id).exists()


def test_the_last_matching_check_past_the_horizon_clears_it(owner):
    source = package(owner)
    now = timezone.now()
    EntitySource.objects.filter(id=source.id).update(
        external_check_until=now + timedelta(seconds=1), last_external_check_at=None
    )
    source.refresh_from_db()
    assert reconcile.check(source, now + timedelta(seconds=2)) == "unchanged"
    source.refresh_from_db()
    assert source.external_check_until is None


def test_a_push_that_fails_its_checks_leaves_everything_and_is_counted(owner, frozen_clock, caplog):
    frozen_clock.move_to(NOON)
    source = package(owner)
    before = source.published_commit
    repo_tokens.mint(source, "write")
    pushed(source, BAD)
    horizon = EntitySource.objects.get(id=source.id).external_check_until
    frozen_clock.move_to(NOON + timedelta(minutes=5))
    with caplog.at_level(logging.INFO, logger="kody.lanes"):
        run_lane("reconcile_artifacts_pushes")
    source.refresh_from_db()
    assert source.published_commit == before and source.external_check_until == horizon
    line = [r.message for r in caplog.records if "reconcile_artifacts_pushes" in r.message][-1]
    assert "rejected_checks=1" in line


def test_a_locked_package_is_not_promoted(owner, frozen_clock):
    frozen_clock.move_to(NOON)
    source = package(owner)
    before = source.published_commit
    packages.update(owner.stable_user_id, source.entity_id, locked=True)
    repo_tokens.mint(source, "write")
    pushed(source, GOOD)
    frozen_clock.move_to(NOON + timedelta(minutes=5))
    run_lane("reconcile_artifacts_pushes")
    source.refresh_from_db()
    assert source.published_commit == before


def test_an_exhausted_budget_stops_the_pass(owner, frozen_clock):
    frozen_clock.move_to(NOON)
    source = package(owner)
    repo_tokens.mint(source, "write")
    lane = replace(registry.get("reconcile_artifacts_pushes"), budget_seconds=0)
    run = LaneRun(lane)
    reconcile.run(run)
    assert run.budget_exhausted and run.items == 0
    source.refresh_from_db()
    assert source.last_external_check_at == NOON  # as the save's publish left it


def test_the_daily_backstop_covers_dormant_sources_and_drops_expired_tokens(owner, frozen_clock):
    frozen_clock.move_to(NOON)
    source = package(owner)
    old, _ = repo_tokens.mint(source, "read")
    RepoToken.objects.filter(id=old.id).update(expires_at=NOON - timedelta(minutes=1))
    live, _ = repo_tokens.mint(source, "read", ttl=timedelta(days=2))
    EntitySource.objects.filter(id=source.id).update(external_check_until=None)
    new = pushed(source, GOOD)

    frozen_clock.move_to(datetime(2031, 3, 15, 3, 1, tzinfo=UTC))
    run_lane("reconcile_artifacts_pushes")
    source.refresh_from_db()
    assert source.published_commit == new
    assert list(RepoToken.objects.values_list("id", flat=True)) == [live.id]
