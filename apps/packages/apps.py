from django.apps import AppConfig


class PackagesConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "apps.packages"
    label = "packages"
    verbose_name = "Packages"

    def ready(self) -> None:
        # Imported here: the actor and entitlements' registries need the app registry.
        from apps.entitlements.services.counters import register_counter
        from apps.entitlements.services.storage import register_bucket_estimator
        from apps.packages.actor import RepoSessionIndex
        from apps.packages.services.repo_sessions.accounting import (
            ACTIVE_SESSIONS_SQL,
            active_sessions,
            workspace_bytes,
        )

        # The index is the authority for active sessions (the repo_sessions plan limit).
        register_counter(
            "repo_sessions",
            active_sessions,
            actor=RepoSessionIndex.name,
            schema_count=ACTIVE_SESSIONS_SQL,
        )
        register_bucket_estimator("repo_session", workspace_bytes)

        from apps.packages.services import secrets
        from apps.packages.services.integrations.tokens import reserved_to_granted_packages

        # An integration may reserve its tokens to the packages it names.
        secrets.register_exclusive_grant_check(reserved_to_granted_packages)
