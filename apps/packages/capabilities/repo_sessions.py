"""Repo session capabilities (domain ``repos``): an agent's file-level editing loop over a repo
or package source — open, edit, inspect, commit, check, publish (seed 003)."""

from __future__ import annotations

from typing import Any

from apps.packages.services.repo_sessions import edits, sessions
from kody.capabilities import Context, capability
from kody.capabilities.cursors import cursor_schema

ID = {"type": "string", "minLength": 1, "maxLength": 64}
PATH = {"type": "string", "minLength": 1, "maxLength": 1024}
PATHS = {"type": "array", "items": PATH, "maxItems": 1000}


def _schema(required: list[str], **props: Any) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"sessionId": ID, **props},
        "required": ["sessionId", *required],
        "additionalProperties": False,
    }


BY_SESSION = _schema([])


BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"


@capability(
    name="repoOpenSession",
    domain="repos",
    mutates=True,
    title="Open a repo editing session",
    description=(
        "Start editing a repo or package (pass repoId or packageId) on a session branch over "
        "its current HEAD. With conversationId, the active session of that conversation on the "
        "same source is returned instead of a new one."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "repoId": ID,
            "packageId": ID,
            "conversationId": {"type": "string", "minLength": 1, "maxLength": 255},
            "branch": {"type": "string", "minLength": 1, "maxLength": 200},
        },
        # Exactly one source: a repo or a package.
        "oneOf": [
            {"required": ["repoId"], "not": {"required": ["packageId"]}},
            {"required": ["packageId"], "not": {"required": ["repoId"]}},
        ],
        "additionalProperties": False,
    },
)
def repo_open_session(
    ctx: Context,
    repoId: str | None = None,
    packageId: str | None = None,  # noqa: N803
    conversationId: str | None = None,
    branch: str | None = None,
) -> dict:  # noqa: N803
    answer = sessions.open_session(
        ctx.user,
        repo_id=repoId,
        package_id=packageId,
        conversation_id=conversationId,
        branch=branch,
    )
    return {"session": answer["session"]}


@capability(
    name="repoGetSession",
    domain="repos",
    title="Read a repo session",
    description="One of your repo sessions by id.",
    input_schema=BY_SESSION,
)
def repo_get_session(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return {"session": sessions.get(ctx.user_id, sessionId)}


@capability(
    name="repoListSessions",
    domain="repos",
    title="List repo sessions",
    description="Your repo sessions, newest first (pass nextCursor back as cursor).",
    input_schema={
        "type": "object",
        "properties": {
            "status": {"type": "string", "enum": ["active", "published", "discarded"]},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100},
            "cursor": cursor_schema(1000),
        },
        "additionalProperties": False,
    },
)
def repo_list_sessions(
    ctx: Context, status: str | None = None, limit: int = 50, cursor: str | None = None
) -> dict[str, Any]:
    return sessions.list_page(ctx.user_id, status, limit, cursor)


@capability(
    name="repoDiscardSession",
    domain="repos",
    mutates=True,
    title="Discard a repo session",
    description="Throw a session's uncommitted and unpublished work away.",
    input_schema=BY_SESSION,
)
def repo_discard_session(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return {"session": sessions.public(sessions.discard(ctx.user_id, sessionId))}


@capability(
    name="repoPublishSession",
    domain="repos",
    mutates=True,
    title="Publish a repo session",
    description=(
        "Commit what is uncommitted, push the session commit to the source's branch and, for "
        "a package, publish it after its checks. A failing check publishes nothing."
    ),
    input_schema=_schema([], message={"type": "string", "minLength": 1, "maxLength": 2000}),
)
def repo_publish_session(ctx: Context, sessionId: str, message: str | None = None) -> dict:  # noqa: N803
    return sessions.publish_session(ctx.user, sessionId, message)


@capability(
    name="repoRebaseSession",
    domain="repos",
    mutates=True,
    title="Rebase a repo session",
    description="Move the session onto the source's new HEAD; conflicting files are "
    "listed and nothing changes.",
    input_schema=BY_SESSION,
)
def repo_rebase_session(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return sessions.rebase(ctx.user_id, sessionId)


@capability(
    name="repoReadFile",
    domain="repos",
    title="Read a file in a repo session",
    description="A file of the session's working tree (utf-8, or base64 if binary).",
    input_schema=_schema(["path"], path=PATH),
)
def repo_read_file(ctx: Context, sessionId: str, path: str) -> dict[str, Any]:  # noqa: N803
    return edits.read_file(ctx.user_id, sessionId, path)


@capability(
    name="repoWriteFile",
    domain="repos",
    mutates=True,
    title="Write a file in a repo session",
    description="Create or overwrite one file (at most 10 MiB).",
    input_schema={
        **_schema(
            ["path", "content"],
            path=PATH,
            content={"type": "string"},
            encoding={"type": "string", "enum": ["utf-8", "base64"]},
        ),
        # With encoding base64, content is strict base64 (padded, no whitespace).
        "anyOf": [
            {"not": {"required": ["encoding"]}},
            {"properties": {"encoding": {"const": "utf-8"}}},
            {"properties": {"content": {"pattern": BASE64_PATTERN}}},
        ],
    },
)
def repo_write_file(
    ctx: Context,
    sessionId: str,
    path: str,
    content: str,  # noqa: N803
    encoding: str = "utf-8",
) -> dict[str, Any]:
    return edits.write_file(ctx.user_id, sessionId, path, content, encoding)


@capability(
    name="repoEditFiles",
    domain="repos",
    mutates=True,
    title="Edit files in a repo session",
    description=(
        "A batch of edits, all or nothing: write {path, content}, replace {path, search, "
        "replace} (search must match exactly once), writeJson {path, value}, delete {path}, "
        "move {from, to}. Edits of the same path apply in order."
    ),
    input_schema=_schema(
        ["edits"],
        edits={
            "type": "array",
            "minItems": 1,
            "maxItems": 200,
            "items": {"type": "object", "required": ["op"]},
        },
    ),
)
def repo_edit_files(ctx: Context, sessionId: str, edits: list[dict[str, Any]]) -> dict:  # noqa: N803
    from apps.packages.services.repo_sessions import edits as edit_service

    return edit_service.edit_files(ctx.user_id, sessionId, edits)


@capability(
    name="repoApplyPatch",
    domain="repos",
    mutates=True,
    title="Apply a unified diff in a repo session",
    description="Apply a unified diff; a hunk that does not apply refuses the whole "
    "patch and is named.",
    input_schema=_schema(["patch"], patch={"type": "string"}),
)
def repo_apply_patch(ctx: Context, sessionId: str, patch: str) -> dict[str, Any]:  # noqa: N803
    return edits.apply_patch(ctx.user_id, sessionId, patch)


@capability(
    name="repoRestore",
    domain="repos",
    mutates=True,
    title="Restore files in a repo session",
    description="Put paths (all by default) back as the session's last commit has them.",
    input_schema=_schema([], paths=PATHS),
)
def repo_restore(ctx: Context, sessionId: str, paths: list[str] | None = None) -> dict:  # noqa: N803
    return edits.restore(ctx.user_id, sessionId, paths)


@capability(
    name="repoCommit",
    domain="repos",
    mutates=True,
    title="Commit in a repo session",
    description="Commit the working tree on the session branch.",
    input_schema=_schema(
        ["message"], message={"type": "string", "minLength": 1, "maxLength": 2000}
    ),
)
def repo_commit(ctx: Context, sessionId: str, message: str) -> dict[str, Any]:  # noqa: N803
    return sessions.commit(ctx.user, sessionId, message)


@capability(
    name="repoDiff",
    domain="repos",
    title="Diff a repo session",
    description="A unified diff of the working tree against the session's base.",
    input_schema=_schema([], paths=PATHS),
)
def repo_diff(ctx: Context, sessionId: str, paths: list[str] | None = None) -> dict:  # noqa: N803
    return {"diff": sessions.diff(ctx.user_id, sessionId, paths)}


@capability(
    name="repoLog",
    domain="repos",
    title="Log of a repo session",
    description="Commits from the session's head back through its base.",
    input_schema=_schema([], limit={"type": "integer", "minimum": 1, "maximum": 100}),
)
def repo_log(ctx: Context, sessionId: str, limit: int = 20) -> dict[str, Any]:  # noqa: N803
    return {"commits": sessions.log(ctx.user_id, sessionId, limit)}


@capability(
    name="repoStatus",
    domain="repos",
    title="Status of a repo session",
    description="Files added, modified, deleted or renamed against the base.",
    input_schema=BY_SESSION,
)
def repo_status(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return {"changes": sessions.status(ctx.user_id, sessionId)}


@capability(
    name="repoTree",
    domain="repos",
    title="List files in a repo session",
    description="Files and folders of the working tree under path (the root by default).",
    input_schema=_schema([], path={"type": "string", "maxLength": 1024}),
)
def repo_tree(ctx: Context, sessionId: str, path: str | None = None) -> dict[str, Any]:  # noqa: N803
    return {"entries": edits.listing(ctx.user_id, sessionId, path)}


@capability(
    name="repoSearch",
    domain="repos",
    title="Search a repo session",
    description="Lines of the working tree's text files that contain query (or match it as "
    "a regex).",
    input_schema=_schema(
        ["query"],
        query={"type": "string", "minLength": 1, "maxLength": 200},
        regex={"type": "boolean"},
    ),
)
def repo_search(ctx: Context, sessionId: str, query: str, regex: bool = False) -> dict:  # noqa: N803
    return edits.search(ctx.user_id, sessionId, query, regex)


@capability(
    name="repoRunChecks",
    domain="repos",
    mutates=True,
    title="Run publish checks in a repo session",
    description="Run the publish checks on the working tree without publishing; an "
    "unchanged tree returns its earlier run.",
    input_schema=BY_SESSION,
)
def repo_run_checks(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return {"checkRunId": sessions.run_session_checks(ctx.user, sessionId)["checkRunId"]}


@capability(
    name="repoGetCheckStatus",
    domain="repos",
    title="Read a check run",
    description="The status and results of one check run of the session.",
    input_schema=_schema(["checkRunId"], checkRunId=ID),
)
def repo_get_check_status(ctx: Context, sessionId: str, checkRunId: str) -> dict:  # noqa: N803
    return sessions.check_status(ctx.user_id, sessionId, checkRunId)


@capability(
    name="repoShowPublishNote",
    domain="repos",
    title="What publishing a repo session would do",
    description="Files changed, the checks of the current tree, and the target branch and commit.",
    input_schema=BY_SESSION,
)
def repo_show_publish_note(ctx: Context, sessionId: str) -> dict[str, Any]:  # noqa: N803
    return sessions.publish_note(ctx.user_id, sessionId)
