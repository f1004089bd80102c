"""Plain repos (``user_repos`` + an ``entity_sources`` row of kind ``repo``) and git remotes.

Every read is scoped by the owner; another user's repo id is "not found".
"""

from __future__ import annotations

import base64
import json
import re
import shlex
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from apps.entitlements.services import assert_within
from apps.packages.models import EntitySource, UserRepo
from apps.packages.models.gitstore import RepoTokenAccess
from apps.packages.models.sources import EntityKind
from apps.packages.services import repo_tokens, sources
from apps.packages.services.git import DEFAULT_BRANCH
from kody.errors import Conflict, InvalidInput, NotFound

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
MAX_PAGE = 100


class RepoNotFound(NotFound):
    code = "repo_not_found"
    message = "No repo with that id."


class RepoNameTaken(Conflict):
    code = "repo_name_taken"
    message = "You already have a repo with that name."


def to_json(repo: UserRepo, source: EntitySource) -> dict[str, Any]:
    return {
        "id": repo.id,
        "name": repo.name,
        "description": repo.description,
        "sourceId": source.id,
        "defaultBranch": DEFAULT_BRANCH,
        "createdAt": repo.created_at.isoformat(),
    }


def _source_of(repo: UserRepo) -> EntitySource:
    return EntitySource.objects.get(
        user_id=repo.user_id, entity_kind=EntityKind.REPO, entity_id=repo.id
    )


def create(user_id: str, name: str, description: str = "") -> tuple[UserRepo, EntitySource]:
    if not NAME_RE.match(name):
        raise InvalidInput(
            "A repo name is 1-100 letters, digits, '.', '_' or '-', starting with a letter or "
            "digit.",
            details={"name": name[:120]},
        )
    # COUNT-LIMIT SITE (repos): the plain count check; switch to the atomic count-limit
    # mechanism of apps/entitlements once it lands.
    assert_within(user_id, "repos")
    try:
        with transaction.atomic():
            repo = UserRepo.objects.create(user_id=user_id, name=name, description=description)
            source = sources.create_source(user_id, EntityKind.REPO, repo.id)
    except IntegrityError as exc:
        raise RepoNameTaken(details={"name": name}) from exc
    return repo, source


def get(user_id: str, repo_id: str) -> tuple[UserRepo, EntitySource]:
    repo = UserRepo.objects.filter(user_id=user_id, id=repo_id).first()
    if repo is None:
        raise RepoNotFound(details={"repoId": repo_id})
    return repo, _source_of(repo)


def encode_cursor(*parts: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(parts).encode()).decode()


def decode_cursor(cursor: str | None, size: int) -> list[str] | None:
    if not cursor:
        return None
    try:
        parts = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise InvalidInput("That cursor is not one this list gave out.") from exc
    if (
        not isinstance(parts, list)
        or len(parts) != size
        or not all(isinstance(p, str) for p in parts)
    ):
        raise InvalidInput("That cursor is not one this list gave out.")
    return parts


def list_page(user_id: str, *, limit: int = 50, cursor: str | None = None) -> dict[str, Any]:
    limit = max(1, min(limit, MAX_PAGE))
    rows = UserRepo.objects.filter(user_id=user_id).order_by("name", "id")
    after = decode_cursor(cursor, 2)
    if after:
        rows = rows.filter(Q(name__gt=after[0]) | Q(name=after[0], id__gt=after[1]))
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    by_entity = {
        s.entity_id: s
        for s in EntitySource.objects.filter(
            user_id=user_id, entity_kind=EntityKind.REPO, entity_id__in=[r.id for r in page]
        )
    }
    return {
        "repos": [to_json(r, by_entity[r.id]) for r in page if r.id in by_entity],
        "nextCursor": encode_cursor(page[-1].name, page[-1].id) if more else None,
    }


def delete(user_id: str, repo_id: str) -> None:
    repo, source = get(user_id, repo_id)
    with transaction.atomic():
        UserRepo.objects.filter(id=repo.id, user_id=user_id).delete()
        sources.purge(source)


def git_remote(
    user: Any, source: EntitySource, access: str = "read", *, folder: str = "repo"
) -> dict[str, Any]:
    """A fresh token and the exact ``git`` lines that clone with it (seed 000)."""
    if access not in RepoTokenAccess.values:
        raise InvalidInput('access is "read" or "write".', details={"access": access})
    token, raw = repo_tokens.mint(source, access)
    remote = f"{settings.SITE_URL.rstrip('/')}/git/{source.id}.git"
    name = (getattr(user, "display_name", "") or getattr(user, "username", "")).strip()
    author = {"name": name or "Kody user", "email": user.email}
    header = f"http.extraHeader=Authorization: Bearer {raw}"
    folder = shlex.quote(folder)
    commands = [
        f"git -c {shlex.quote(header)} clone {shlex.quote(remote)} {folder}",
        f"git -C {folder} config http.extraHeader {shlex.quote(header.split('=', 1)[1])}",
        f"git -C {folder} config user.name {shlex.quote(author['name'])}",
        f"git -C {folder} config user.email {shlex.quote(author['email'])}",
    ]
    return {
        "remote": remote,
        "token": raw,
        "access": access,
        "expiresAt": token.expires_at.isoformat(),
        "gitAuthor": author,
        "setupCommands": commands,
    }
