"""job_retention with per-user windows; the shared retention loop; the growth manifest."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.jobs.models import ArchivedJobArtifact, Job
from kody.lanes import run_lane
from kody.retention import EXEMPT, GROWING_TABLES, PENDING, POLICIES, Policy, run_policies
from tests.jobs.factories import ArchivedJobArtifactFactory, JobFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def make_job(user, *, kind="once", status="success", age_days=0, **extra):  # type: ignore[no-untyped-def]
    at = timezone.now() - timedelta(days=age_days)
    schedule = (
        {"type": "once", "runAt": at.isoformat()}
        if kind == "once"
        else {"type": "cron", "expression": "0 * * * *"}
    )
    job = JobFactory(
        user_id=user.stable_user_id,
        source_id=extra.pop("source_id", ""),
        schedule_json=schedule,
        next_run_at=at,
        enabled=extra.pop("enabled", False),
        last_run_at=at,
        last_run_status=status,
        **extra,
    )
    Job.objects.filter(id=job.id).update(updated_at=at)
    return job.id


def test_job_retention_uses_the_default_windows(owner):
    fresh = make_job(owner, age_days=13)
    old = make_job(owner, age_days=15)
    failed_recent = make_job(owner, status="error", age_days=59)
    failed_old = make_job(owner, status="error", age_days=61)
    paused_recent = make_job(owner, kind="cron", age_days=89)
    paused_old = make_job(owner, kind="cron", age_days=91)
    run_lane("job_retention")
    left = set(Job.objects.values_list("id", flat=True))
    assert left == {fresh, failed_recent, paused_recent}
    assert not {old, failed_old, paused_old} & left


def test_job_retention_keeps_preserved_package_and_active_jobs(owner):
    kept = {
        make_job(owner, age_days=400, preserved=True),
        make_job(owner, age_days=400, source_id="src-1"),
        make_job(owner, age_days=400, id="package-job:pkg:nightly"),
        make_job(owner, kind="cron", age_days=400, enabled=True),
    }
    run_lane("job_retention")
    assert set(Job.objects.values_list("id", flat=True)) == kept


def test_job_retention_honours_each_users_own_window(owner, outsider):
    owner.job_retention_success_once_days = 3
    owner.save(update_fields=["job_retention_success_once_days"])
    owners = make_job(owner, age_days=4)
    outsiders = make_job(outsider, age_days=4)  # default 14 days: kept
    run_lane("job_retention")
    assert set(Job.objects.values_list("id", flat=True)) == {outsiders}
    assert owners not in set(Job.objects.values_list("id", flat=True))


def test_archived_artifacts_go_at_retain_until(owner):
    now = timezone.now()
    for n, delta in enumerate((-1, 1)):
        ArchivedJobArtifactFactory(
            job_id=f"j{n}", user_id=owner.stable_user_id, retain_until=now + timedelta(days=delta)
        )
    run_lane("job_retention")
    assert list(ArchivedJobArtifact.objects.values_list("job_id", flat=True)) == ["j1"]


def test_the_retention_loop_is_round_robin_and_the_first_pass_completes():
    calls: list[str] = []
    ticks = iter(range(1000))

    def table(name: str, rows: int):  # type: ignore[no-untyped-def]
        left = [rows]

        def prune(batch: int) -> int:
            calls.append(name)
            done = min(batch, left[0])
            left[0] -= done
            return done

        return Policy(name, prune, batch_size=10)

    progress = run_policies(
        "test",
        [table("hot", 1000), table("cold", 15), table("empty", 0)],
        budget_seconds=4,
        clock=lambda: float(next(ticks)),
    )
    assert calls[:3] == ["hot", "cold", "empty"]  # every table once before any twice
    assert calls[3:5] == ["hot", "cold"]
    assert progress.budget_exhausted and progress.batches["empty"] == 1
    assert "retention-prune lane=test batches=cold:2,empty:1,hot:" in progress.line("test")


def test_the_first_pass_completes_even_with_no_budget():
    seen: list[str] = []
    policies = [Policy(n, lambda b, n=n: seen.append(n) or b, batch_size=1) for n in "abc"]
    progress = run_policies("test", policies, budget_seconds=0)
    assert seen == ["a", "b", "c"] and progress.budget_exhausted


def test_every_growing_table_has_a_policy_an_exemption_or_a_named_gap():
    from django.db import connections

    from kody.lanes import all_lanes

    tables = {
        t for alias in ("default", "audit") for t in connections[alias].introspection.table_names()
    }
    assert set(GROWING_TABLES) <= tables, "a manifest table no longer exists"
    for table in GROWING_TABLES:
        assert sum(table in group for group in (POLICIES, EXEMPT, PENDING)) == 1, table
    lanes = {lane.name for lane in all_lanes()}
    missing = {table: lane for table, lane in POLICIES.items() if lane not in lanes}
    assert not missing, f"policies name lanes that do not exist: {missing}"
    assert all(EXEMPT.values()), "an exemption needs a documented reason"
