"""Per-user actors of the packages app: RepoSessionIndex (repo sessions, SCHEMA.md §2.4),
McpClientHub (remote MCP servers) and RemoteConnectorSession (remote connectors)."""

from apps.accounts.actor_surfaces import ActorSurface, register_actor
from apps.packages.actor.connector import RemoteConnectorSession
from apps.packages.actor.index import RepoSessionIndex
from apps.packages.actor.mcp_hub import McpClientHub

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

register_actor(
    ActorSurface(
        McpClientHub.name,
        purge="purge",
        export_pages=None,
        export_section=None,
        note="connection state and the cached tool lists of the person's remote MCP servers: "
        "derived from the servers themselves (rebuilt by mcpServerRefresh) and not portable; "
        "the servers' settings are exported as mcp_server_settings rows",
    )
)

register_actor(
    ActorSurface(
        RemoteConnectorSession.name,
        purge="purge",
        export_pages="export_pages",
        export_section="remote_connector_session",
        import_note="a connector's session is live state: it starts again when the connector "
        "says hello to the new account; the registrations come back as "
        "remote_connector_settings rows",
        note="each connector's session (connected, last seen, the tools it offered); session "
        "tokens are not exported",
    )
)

__all__ = ["McpClientHub", "RemoteConnectorSession", "RepoSessionIndex"]
