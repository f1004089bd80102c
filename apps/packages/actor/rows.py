"""JSON shapes of the index's rows: the capabilities' session and file views, and export rows."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from apps.packages.actor import models as m


def session_json(row: m.RepoSession) -> dict[str, Any]:
    def iso(value: datetime | None) -> str | None:
        return value.isoformat() if value else None

    return {
        "id": row.id,
        "sourceId": row.source_id,
        "sourceRepoId": row.source_repo_id,
        "sessionBranch": row.session_branch,
        "sourceBranch": row.source_branch,
        "baseCommit": row.base_commit,
        "sourceRoot": row.source_root,
        "conversationId": row.conversation_id,
        "status": row.status,
        "expiresAt": iso(row.expires_at),
        "lastCheckpointAt": iso(row.last_checkpoint_at),
        "lastCheckpointCommit": row.last_checkpoint_commit,
        "lastCheckRunId": row.last_check_run_id,
        "lastCheckTreeHash": row.last_check_tree_hash,
        "createdAt": iso(row.created_at),
        "updatedAt": iso(row.updated_at),
    }


def file_json(row: m.RepoSessionFile) -> dict[str, Any]:
    content = bytes(row.content) if row.content is not None else None
    return {
        "path": row.path,
        "deleted": row.deleted,
        "content": base64.b64encode(content).decode() if content is not None else None,
        "blobKey": row.blob_key,
        "size": row.size,
        "sha": row.sha,
    }


def export_row(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in obj._meta.concrete_fields:
        value = getattr(obj, field.attname)
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, memoryview | bytes):
            value = base64.b64encode(bytes(value)).decode()
        out[field.column] = value
    return out
