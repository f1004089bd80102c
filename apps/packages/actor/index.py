"""RepoSessionIndex: one user's catalog of repo editing sessions and their workspaces.

Design note. The catalog row is the authority for a session: the active count behind the
``repo_sessions`` plan limit, conversation resume, export and the deletion inventory. Each
session's workspace (the paths it changed against its base commit) is kept in the same
schema, keyed by session id, so a session id is found only in its owner's catalog — another
user's id is "not found" on every call, before any workspace row is read. Content above the
inline threshold is spilled by the caller to ``repo_session_blobs`` under
``repo-session:{sessionId}/`` before the call that records it; a spilled key outside that
prefix is refused. Blob deletes follow the seed's order: cleanup deletes a session's blobs
before its rows (a failed delete rolls the call back and keeps the row for the next pass);
discard marks the row and drops its files, and the caller purges the prefix afterwards.
The index keeps ``repo_session_due_owners`` (one public hint row per user with any session,
due at the earliest expiry) in step in the same transaction, and arms its own alarm.
"""

from __future__ import annotations

import base64
import json
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import connections
from django.db.models import Min, Sum
from django.utils import timezone

from apps.packages.actor import models as m
from apps.packages.actor.rows import export_row, file_json, session_json
from apps.packages.models import RepoSessionDueOwner, SourceRepoRef, UserStorageBucket
from kody import blobs
from kody.actors import Actor, OwnerMismatch, deletion_safe, reads
from kody.errors import Conflict, InvalidInput, NotFound

BUCKET = "repo_session_blobs"
UNUSED_TTL = timedelta(minutes=30)
EDITED_TTL = timedelta(days=7)
PAGE_MAX = 100
CLEANUP_BATCH = 50


class SessionNotFound(NotFound):
    code = "repo_session_not_found"
    message = "No repo session with that id."


class SessionNotActive(Conflict):
    code = "repo_session_not_active"
    message = "This repo session is no longer active (published or discarded)."


class SessionLimitReached(Conflict):
    code = "limit_reached"
    status = 403
    message = "Limit reached: active repo sessions."


def storage_id(session_id: str) -> str:
    return f"repo-session:{session_id}"


class RepoSessionIndex(Actor):
    name = "packages.RepoSessionIndex"
    tables = (
        m.RepoSessionIndexMeta,
        m.RepoSessionIndexOwnerIdentity,
        m.RepoSession,
        m.RepoSessionFile,
        m.RepoSessionCheckRun,
    )

    # --- owner and rows ----------------------------------------------------------------------

    def _check_owner(self) -> None:
        found = m.RepoSessionIndexOwnerIdentity.objects.filter(id=1).values_list(
            "owner_id", flat=True
        )
        owner = found.first()
        if owner is None and not self.context.read_only:
            m.RepoSessionIndexOwnerIdentity.objects.create(id=1, owner_id=self.user_id)
            m.RepoSessionIndexMeta.objects.update_or_create(
                key="schema_version", defaults={"value": str(m.INDEX_VERSION)}
            )
        elif owner is not None and owner != self.user_id:
            raise OwnerMismatch("this session index belongs to another owner")

    def _session(self, session_id: str, *, active: bool = False) -> m.RepoSession:
        self._check_owner()
        row = m.RepoSession.objects.filter(id=str(session_id)).first()
        if row is None:
            raise SessionNotFound(details={"sessionId": session_id})
        if active and row.status != "active":
            raise SessionNotActive(details={"sessionId": session_id, "status": row.status})
        return row

    def _sync_due(self) -> None:
        """The public hint row: due at the earliest expiry, gone with the last session."""
        due = m.RepoSession.objects.aggregate(at=Min("expires_at"))["at"]
        if due is None:
            RepoSessionDueOwner.objects.filter(user_id=self.user_id).delete()
            self.clear_alarm()
            return
        with connections[self.context.using].cursor() as cursor:
            cursor.execute(
                "INSERT INTO repo_session_due_owners (user_id, due_at, created_at, updated_at)"
                " VALUES (%s, %s, %s, %s) ON CONFLICT (user_id) DO UPDATE"
                " SET due_at = EXCLUDED.due_at, updated_at = EXCLUDED.updated_at",
                [self.user_id, due, timezone.now(), timezone.now()],
            )
        self.set_alarm(due)

    def _inventory(self, session_id: str) -> None:
        """The session's workspace in ``user_storage_buckets`` (kind repo_session), measured
        and upserted in one statement."""
        now = timezone.now()
        with connections[self.context.using].cursor() as cursor:
            cursor.execute(
                "INSERT INTO user_storage_buckets (user_id, storage_id, kind, last_seen_at,"
                " estimated_bytes, estimated_bytes_updated_at, created_at)"
                " SELECT %s, %s, 'repo_session', %s, COALESCE(SUM(size), 0), %s, %s"
                " FROM repo_session_files WHERE session_id = %s"
                " ON CONFLICT (user_id, storage_id) DO UPDATE SET"
                " last_seen_at = EXCLUDED.last_seen_at,"
                " estimated_bytes = EXCLUDED.estimated_bytes,"
                " estimated_bytes_updated_at = EXCLUDED.estimated_bytes_updated_at",
                [self.user_id, storage_id(session_id), now, now, now, session_id],
            )

    def _touch(self, row: m.RepoSession, now: datetime, *, edited: bool = False) -> None:
        edited = (
            edited
            or bool(row.last_checkpoint_commit)
            or (m.RepoSessionFile.objects.filter(session_id=row.id).exists())
        )
        row.expires_at = now + (EDITED_TTL if edited else UNUSED_TTL)
        row.updated_at = now

    # --- catalog -------------------------------------------------------------------------------

    def open_session(
        self, source: dict[str, Any], conversation_id: str | None, limit: int | None
    ) -> dict[str, Any]:
        """The active session of ``conversation_id`` on that source (resume), or a new one
        within the plan's active-session ``limit``."""
        self._check_owner()
        now = timezone.now()
        if conversation_id:
            found = m.RepoSession.objects.filter(
                conversation_id=conversation_id, status="active", source_id=source["sourceId"]
            ).first()
            if found is not None:
                self._touch(found, now)
                found.save()
                self._sync_due()
                return {"session": session_json(found), "resumed": True}
        active = m.RepoSession.objects.filter(status="active").count()
        if limit is not None and active + 1 > limit:
            raise SessionLimitReached(
                f"Limit reached: active repo sessions ({limit:,}); discard or publish one first.",
                details={"resource": "repo_sessions", "limit": limit, "used": active},
            )
        session_id = uuid.uuid4().hex
        row = m.RepoSession.objects.create(
            id=session_id,
            source_id=source["sourceId"],
            source_repo_id=source["repoId"],
            session_branch=f"kody-session/{session_id}",
            source_branch=source["branch"],
            base_commit=source["baseCommit"],
            source_root="",
            conversation_id=conversation_id or None,
            status="active",
            expires_at=now + UNUSED_TTL,
            created_at=now,
            updated_at=now,
        )
        self._inventory(session_id)
        self._sync_due()
        return {"session": session_json(row), "resumed": False}

    @reads
    def get_session(self, session_id: str) -> dict[str, Any]:
        return session_json(self._session(session_id))

    @reads
    def list_sessions(
        self, status: str | None = None, limit: int = 50, cursor: str | None = None
    ) -> dict[str, Any]:
        self._check_owner()
        limit = max(1, min(int(limit or 50), PAGE_MAX))
        rows = m.RepoSession.objects.order_by("-created_at", "-id")
        if status:
            rows = rows.filter(status=status)
        if cursor:
            try:
                created, last_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
                rows = rows.filter(created_at__lte=created).exclude(
                    created_at=created, id__gte=last_id
                )
            except (ValueError, TypeError) as exc:
                raise InvalidInput("That cursor is not valid.", code="invalid_cursor") from exc
        page = list(rows[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        next_cursor = None
        if more:
            last = page[-1]
            token = json.dumps([last.created_at.isoformat(), last.id]).encode()
            next_cursor = base64.urlsafe_b64encode(token).decode()
        counts = {
            r.id: r.n
            for r in m.RepoSession.objects.raw(
                "SELECT s.id, (SELECT count(*) FROM repo_session_files f"
                " WHERE f.session_id = s.id) AS n FROM repo_sessions s WHERE s.id = ANY(%s)",
                [[r.id for r in page]],
            )
        }
        sessions = [{**session_json(r), "changedFiles": counts.get(r.id, 0)} for r in page]
        return {"sessions": sessions, "nextCursor": next_cursor}

    @reads
    def count_active(self) -> int:
        self._check_owner()
        return m.RepoSession.objects.filter(status="active").count()

    def update_session(
        self, session_id: str, fields: dict[str, Any], expect: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Set catalog fields (``base_commit``, ``last_checkpoint_*``, ``last_check_*``,
        ``status``) if the row still holds ``expect`` (compare-and-set against a racing call)."""
        row = self._session(session_id, active=True)
        for name, value in (expect or {}).items():
            if getattr(row, name) != value:
                raise Conflict(
                    "The session changed meanwhile; read it and try again.",
                    code="repo_session_changed",
                    details={"field": name},
                )
        allowed = {
            "base_commit",
            "last_checkpoint_at",
            "last_checkpoint_commit",
            "last_check_run_id",
            "last_check_tree_hash",
            "status",
        }
        for name, value in fields.items():
            if name not in allowed:
                raise ValueError(f"{name} is not a catalog field callers may set")
            if name == "last_checkpoint_at" and isinstance(value, str):
                value = datetime.fromisoformat(value)  # datetimes travel as ISO text
            setattr(row, name, value)
        self._touch(row, timezone.now())
        row.save()
        self._sync_due()
        return session_json(row)

    # --- workspace -----------------------------------------------------------------------------

    @reads
    def workspace(self, session_id: str, paths: list[str] | None = None) -> dict[str, Any]:
        """The session row and its changed paths (all, or only ``paths``)."""
        row = self._session(session_id)
        files = m.RepoSessionFile.objects.filter(session_id=row.id).order_by("path")
        if paths is not None:
            files = files.filter(path__in=paths)
        return {"session": session_json(row), "files": [file_json(f) for f in files]}

    def apply_changes(
        self,
        session_id: str,
        changes: list[dict[str, Any]],
        base_commit: str | None = None,
        reset: bool = False,
        rebase_to: str | None = None,
    ) -> dict[str, Any]:
        """Record a batch of path changes, all or nothing. Each change is ``{"path",
        "revert": true}`` (back to the base), ``{"path", "deleted": true}``, or ``{"path",
        "content" (base64) | "blobKey", "size", "sha"}``. ``base_commit``: the base the batch
        was computed against (a rebase in between refuses it); ``reset`` drops every other path;
        ``rebase_to``: the batch moves the session onto that base commit (its earlier session
        commits no longer lead to the new base, so the checkpoint is cleared)."""
        row = self._session(session_id, active=True)
        if base_commit is not None and row.base_commit != base_commit:
            raise Conflict(
                "The session was rebased meanwhile; read it and try again.",
                code="repo_session_changed",
            )
        prefix = blobs.repo_session_prefix(row.id)
        now = timezone.now()
        files = m.RepoSessionFile.objects.filter(session_id=row.id)
        if reset:
            files.delete()
        else:
            files.filter(path__in=[str(c["path"]) for c in changes]).delete()
        rows = []
        for change in changes:
            if change.get("revert"):
                continue  # back to the base: no row
            key = change.get("blobKey")
            if key is not None and not str(key).startswith(prefix):
                raise InvalidInput("A spilled object must live under its session's prefix.")
            content = change.get("content")
            rows.append(
                m.RepoSessionFile(
                    session_id=row.id,
                    path=str(change["path"]),
                    deleted=bool(change.get("deleted")),
                    content=base64.b64decode(content) if content is not None else None,
                    blob_key=key,
                    size=int(change.get("size") or 0),
                    sha=str(change.get("sha") or ""),
                    updated_at=now,
                )
            )
        m.RepoSessionFile.objects.bulk_create(rows)
        if rebase_to is not None:
            row.base_commit, row.last_checkpoint_commit = rebase_to, None
        self._touch(row, now, edited=bool(rows))
        row.save()
        self._inventory(row.id)
        self._sync_due()
        return session_json(row)

    def discard(self, session_id: str) -> dict[str, Any]:
        """Mark the row discarded and drop its workspace rows; the caller then purges the
        blob prefix (and the cleanup pass purges it again before the row goes)."""
        row = self._session(session_id)
        if row.status == "active":
            row.status = "discarded"
        m.RepoSessionFile.objects.filter(session_id=row.id).delete()
        m.RepoSessionCheckRun.objects.filter(session_id=row.id).delete()
        now = timezone.now()
        row.expires_at = min(row.expires_at, now)
        row.updated_at = now
        row.save()
        UserStorageBucket.objects.filter(
            user_id=self.user_id, storage_id=storage_id(row.id)
        ).delete()
        self._sync_due()
        return session_json(row)

    # --- checks ----------------------------------------------------------------------------------

    @reads
    def check_run(
        self, session_id: str, check_run_id: str | None = None, tree_hash: str | None = None
    ) -> dict[str, Any] | None:
        row = self._session(session_id)
        runs = m.RepoSessionCheckRun.objects.filter(session_id=row.id)
        if check_run_id is not None:
            runs = runs.filter(id=check_run_id)
        if tree_hash is not None:
            runs = runs.filter(tree_hash=tree_hash)
        run = runs.order_by("-created_at").first()
        if run is None:
            return None
        return {
            "checkRunId": run.id,
            "treeHash": run.tree_hash,
            "status": run.status,
            "checks": run.checks,
        }

    def record_check_run(
        self, session_id: str, tree_hash: str, status: str, checks: list[dict[str, Any]]
    ) -> dict[str, Any]:
        row = self._session(session_id)
        run = m.RepoSessionCheckRun.objects.create(
            id=uuid.uuid4().hex,
            session_id=row.id,
            tree_hash=tree_hash,
            status=status,
            checks=checks,
            created_at=timezone.now(),
        )
        row.last_check_run_id, row.last_check_tree_hash = run.id, tree_hash
        row.save(update_fields=["last_check_run_id", "last_check_tree_hash"])
        return {"checkRunId": run.id, "treeHash": tree_hash, "status": status, "checks": checks}

    # --- cleanup ---------------------------------------------------------------------------------

    def alarm(self) -> None:
        self.cleanup_due()

    def cleanup_due(self, now: str | None = None) -> dict[str, Any]:
        """Remove sessions past their expiry (idle, discarded, or published and settled):
        blobs first, then rows, so a failed blob delete keeps the row for the next pass."""
        self._check_owner()
        at = datetime.fromisoformat(now) if now else timezone.now()
        due = list(
            m.RepoSession.objects.filter(expires_at__lte=at).order_by("expires_at", "id")[
                :CLEANUP_BATCH
            ]
        )
        removed = [row.id for row in due]  # read first: a deleted instance forgets its id
        for row in due:
            blobs.purge_prefix(BUCKET, blobs.repo_session_prefix(row.id))
            SourceRepoRef.objects.filter(
                repo_id=row.source_repo_id, name=f"refs/heads/{row.session_branch}"
            ).delete()
            m.RepoSessionFile.objects.filter(session_id=row.id).delete()
            m.RepoSessionCheckRun.objects.filter(session_id=row.id).delete()
            UserStorageBucket.objects.filter(
                user_id=self.user_id, storage_id=storage_id(row.id)
            ).delete()
            row.delete()
        self._sync_due()
        return {"removed": removed}

    # --- deletion and export --------------------------------------------------------------------

    @deletion_safe
    def blob_prefixes(self) -> dict[str, Any]:
        """The spill prefix of every session in the catalog, whatever its status."""
        self._check_owner()
        ids = m.RepoSession.objects.order_by("id").values_list("id", flat=True)
        return {
            "prefixes": [{"bucket": BUCKET, "prefix": blobs.repo_session_prefix(i)} for i in ids]
        }

    @deletion_safe
    def purge(self) -> dict[str, Any]:
        deleted = {}
        for model in (
            m.RepoSessionFile,
            m.RepoSessionCheckRun,
            m.RepoSession,
            m.RepoSessionIndexOwnerIdentity,
            m.RepoSessionIndexMeta,
        ):
            deleted[model._meta.db_table] = model.objects.all().delete()[0]
        RepoSessionDueOwner.objects.filter(user_id=self.user_id).delete()
        UserStorageBucket.objects.filter(user_id=self.user_id, kind="repo_session").delete()
        self.clear_alarm()
        return {"deleted": deleted}

    @deletion_safe
    def export_pages(self, cursor: str | None = None, limit: int = 500) -> dict[str, Any]:
        """Catalog rows only: the workspaces are ephemeral scratch."""
        limit = max(1, min(int(limit), 500))
        rows = m.RepoSession.objects.order_by("id")
        if cursor:
            rows = rows.filter(id__gt=cursor)
        page = list(rows[: limit + 1])
        more = len(page) > limit
        page = page[:limit]
        return {
            "repo_sessions": [export_row(r) for r in page],
            "next_cursor": page[-1].id if more else None,
        }

    @reads
    def workspace_bytes(self, session_id: str) -> int:
        """The storage estimate of one workspace (0 for a session that is gone)."""
        self._check_owner()
        size = m.RepoSessionFile.objects.filter(session_id=session_id).aggregate(s=Sum("size"))
        return int(size["s"] or 0)
