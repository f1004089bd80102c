"""What repo sessions count for entitlements: active sessions and workspace bytes."""

from __future__ import annotations

from apps.packages.actor.index import RepoSessionIndex

ACTIVE_SESSIONS_SQL = "SELECT COUNT(*) FROM repo_sessions WHERE status = 'active'"


def active_sessions(user_id: str) -> int:
    return int(RepoSessionIndex.call(user_id, "count_active"))


def workspace_bytes(user_id: str, storage_id: str) -> int:
    """A workspace's bytes (inline and spilled), measured by the index; 0 once it is gone."""
    session_id = storage_id.removeprefix("repo-session:")
    return int(RepoSessionIndex.call(user_id, "workspace_bytes", session_id=session_id))
