"""Refs in Postgres. Every move is a compare-and-swap on locked rows, so two pushes (or a push
and a publish) never both win, and a caller's surrounding transaction decides for all of them."""

from __future__ import annotations

from collections.abc import Sequence

from django.db import IntegrityError, transaction

from apps.packages.models import SourceRepoRef
from kody.errors import Conflict

DEFAULT_BRANCH = "main"
HEAD_REF = f"refs/heads/{DEFAULT_BRANCH}"
ZERO = "0" * 40


class RefMoved(Conflict):
    code = "ref_moved"
    message = "The branch moved while this change was being made; fetch and try again."


def read_refs(repo_id: str) -> dict[str, str]:
    return dict(SourceRepoRef.objects.filter(repo_id=repo_id).values_list("name", "target"))


def head(repo_id: str) -> str | None:
    return (
        SourceRepoRef.objects.filter(repo_id=repo_id, name=HEAD_REF)
        .values_list("target", flat=True)
        .first()
    )


def move_refs(repo_id: str, updates: Sequence[tuple[str, str | None, str | None]]) -> None:
    """Apply ``(name, expected_old, new)`` updates all or none; ``None`` means absent."""
    try:
        _move(repo_id, updates)
    except IntegrityError as exc:  # a concurrent writer created the same ref first
        raise RefMoved() from exc


def _move(repo_id: str, updates: Sequence[tuple[str, str | None, str | None]]) -> None:
    with transaction.atomic():
        names = [name for name, _old, _new in updates]
        current = dict(
            SourceRepoRef.objects.select_for_update()
            .filter(repo_id=repo_id, name__in=names)
            .values_list("name", "target")
        )
        for name, old, _new in updates:
            if current.get(name) != old:
                raise RefMoved(details={"ref": name})
        for name, old, new in updates:
            if new is None:
                SourceRepoRef.objects.filter(repo_id=repo_id, name=name).delete()
            elif old is None:
                SourceRepoRef.objects.create(repo_id=repo_id, name=name, target=new)
            else:
                SourceRepoRef.objects.filter(repo_id=repo_id, name=name).update(target=new)


def delete_all(repo_id: str) -> int:
    deleted, _ = SourceRepoRef.objects.filter(repo_id=repo_id).delete()
    return deleted
