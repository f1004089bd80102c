from django.apps import AppConfig


class JobsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.jobs"
    label = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        # Imported here: entitlements' registries exist only once apps are loaded. The tasks
        # module too: the outbox relay looks jobs.dispatch_runs up by name in whatever process
        # relays (a web process's kick, a lane), not only in autodiscovering workers.
        from apps.entitlements.services.counters import register_counter
        from apps.entitlements.services.storage import (
            register_bucket_estimator,
            register_schema_payload,
        )
        from apps.jobs import (
            tasks,  # noqa: F401
            vectors,  # noqa: F401  (registers the job vector kind)
        )
        from apps.jobs.actor.runlog import CONCURRENT_WORKFLOWS_SQL, RunLog
        from apps.jobs.actor.stored import RUN_RECORDS_SQL
        from apps.jobs.services import package_jobs, runs
        from apps.jobs.services.runs import concurrent_workflows
        from apps.jobs.services.storage import estimate
        from apps.packages.services import run_history

        # StorageRunner buckets are measured by the entitlements estimate lane.
        for kind in ("job", "execute", "package", "service"):
            register_bucket_estimator(kind, estimate)
        # Run records reserve their bytes as they are written; reconciliation measures them the
        # same way, so the nightly reset keeps what the writes charged.
        register_schema_payload(RunLog.name, RUN_RECORDS_SQL)
        # RunLog's workflow projections are the authority for concurrent_workflows; the usage
        # summary reads the same count inside its meter call (one actor round trip, not two).
        register_counter(
            "concurrent_workflows",
            concurrent_workflows,
            actor=RunLog.name,
            schema_count=CONCURRENT_WORKFLOWS_SQL,
        )
        # Package code records its runs in RunLog and publish syncs package jobs: packages,
        # below this app, reaches both through what is registered here.
        run_history.register(runs=runs, package_jobs=package_jobs)
