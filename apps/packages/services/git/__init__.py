"""The source store: real git repositories (dulwich).

Objects and packs live in the ``source_repos`` blob storage under ``{repo_id}/pack/``; refs
live in Postgres (``source_repo_refs``) so a publish moves a ref and
``entity_sources.published_commit`` in one transaction. ``HEAD`` is always the symbolic ref
``refs/heads/main``: the default branch of every repo and package.
"""

from apps.packages.services.git.objects import BUCKET, BucketObjectStore
from apps.packages.services.git.refs import DEFAULT_BRANCH, RefMoved, head, move_refs, read_refs
from apps.packages.services.git.repo import (
    Author,
    commit_files,
    delete_repo,
    is_ancestor,
    open_repo,
    read_tree,
)

__all__ = [
    "BUCKET",
    "DEFAULT_BRANCH",
    "Author",
    "BucketObjectStore",
    "RefMoved",
    "commit_files",
    "delete_repo",
    "head",
    "is_ancestor",
    "move_refs",
    "open_repo",
    "read_refs",
    "read_tree",
]
