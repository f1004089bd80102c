"""Per-user state of repo sessions: the RepoSessionIndex actor (SCHEMA.md §2.4)."""

from apps.accounts.actor_surfaces import ActorSurface, register_actor
from apps.packages.actor.index import RepoSessionIndex

register_actor(
    ActorSurface(
        RepoSessionIndex.name,
        purge="purge",
        export_pages="export_pages",
        export_section="repo_session_index",
        blob_prefixes="blob_prefixes",
        import_note="editing sessions are ephemeral scratch: the catalog is exported for the "
        "record and not restored (the sources they edited are)",
        note="the session catalog; workspaces (changed files, spill in repo_session_blobs "
        "under repo-session:{sessionId}/) are ephemeral scratch and are not exported",
    )
)

__all__ = ["RepoSessionIndex"]
