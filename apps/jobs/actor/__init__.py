"""Per-user state of jobs: the JobManager, RunLog and StorageRunner actors."""

from apps.accounts.actor_surfaces import ActorSurface, register_actor
from apps.jobs.actor.manager import JobManager
from apps.jobs.actor.runlog import RunLog
from apps.jobs.actor.storage import StorageRunner

register_actor(
    ActorSurface(
        JobManager.name,
        purge="purge",
        export_pages="export_state",
        export_section="job_manager",
        import_note="re-armed from the imported jobs table by the job_schedule_watchdog lane",
        note="alarm state only; the jobs themselves are the public jobs table",
    )
)
register_actor(
    ActorSurface(
        RunLog.name,
        purge="purge",
        export_pages="export_runs",
        export_section="run_records",
        import_note="run history of the old instance, kept in the export for the record",
        note="runs with log lines, invocation ledger, workflow projections, job observability, "
        "package run successes, activation milestones",
    )
)
register_actor(
    ActorSurface(
        StorageRunner.name,
        purge="purge",
        export_pages="export_storage",
        export_section="storage_runner",
        import_page="import_storage",
        note="every StorageRunner bucket (storage id -> key -> JSON value)",
    )
)

__all__ = ["JobManager", "RunLog", "StorageRunner"]
