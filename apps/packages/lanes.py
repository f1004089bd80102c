"""The packages domain's scheduled lanes."""

from __future__ import annotations

from apps.packages.services import index_debt, memories, reconcile, retention
from apps.packages.services.codemods import runs as codemod_runs_service
from apps.packages.services.repo_sessions import cleanup as repo_session_cleanup_service
from kody.lanes import Cadence, LaneRun, lane, retire
from kody.retention import Policy, run_policies


@lane("packages_retention", cadence=Cadence.HOURLY, budget_seconds=60, batch_size=1000)
def packages_retention(run: LaneRun) -> None:
    """Memory conversation suppressions expired and unseen for 90 days, bundle artifacts of
    commits no longer published after 30 days, conversation uses 180 days after the last
    (seed 000)."""
    run_policies(
        "packages_retention",
        [
            Policy(
                "mcp_memory_conversation_suppressions",
                lambda n: memories.prune_suppressions(batch=n),
                run.batch_size,
                "90 days unseen and expired",
            ),
            Policy(
                "published_bundle_artifacts",
                retention.prune_bundle_artifacts,
                run.batch_size,
                "30 days, not current, owner has no repo session",
            ),
            Policy(
                "agent_package_conversation_uses",
                retention.prune_conversation_uses,
                run.batch_size,
                "180 days by last_used_at",
            ),
        ],
        record=run.record,
    )


@lane("search_index_debt", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=200)
def search_index_debt(run: LaneRun) -> None:
    """Vectors still owed (deferred, failed, or a lost kick): drain what is due."""
    while not run.out_of_time():
        report = index_debt.drain(limit=run.batch_size)
        run.record(report.indexed)
        if report.handled < run.batch_size:
            break


@lane("reconcile_artifacts_pushes", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=100)
def reconcile_artifacts_pushes(run: LaneRun) -> None:
    """Publish package pushes nobody published (pending sources, every five minutes); in the
    03:00 UTC window, every package source and the expired repo tokens (seed 000)."""
    reconcile.run(run)


@lane("repo_session_cleanup", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=100)
def repo_session_cleanup(run: LaneRun) -> None:
    """One page of 100 due owners per tick (SCHEMA.md §3): bounded, the rest waits."""
    done = repo_session_cleanup_service.cleanup_due(run.batch_size)
    run.record(done.visited)
    run.count("sessions_removed", done.removed)
    run.count("owners_failed", done.failed)


# Retired with the catalog cutover: the name stays so queued messages parse, and does nothing.
retire("repo_session_index_backfill")


@lane("codemod_runs", cadence=Cadence.EVERY_TICK, budget_seconds=60, batch_size=20)
def codemod_runs(run: LaneRun) -> None:
    """Codemod runs nobody is working on (a lost worker or a lost enqueue): continue their
    pending items within the budget; a later tick goes on where this one stopped."""
    for run_id in codemod_runs_service.stalled(limit=run.batch_size):
        if run.out_of_time():
            break
        done = codemod_runs_service.process(run_id, should_stop=run.out_of_time)
        run.record(1 if done.status == codemod_runs_service.COMPLETE else 0)
