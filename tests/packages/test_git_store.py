"""The source store on both blob backends: commits written as packs, read back, bundled and
purged — on the filesystem and on real S3 (moto over HTTP), as ``KODY_STORAGE=s3`` runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from apps.packages.services.git import (
    Author,
    BucketObjectStore,
    commit_files,
    delete_repo,
    is_ancestor,
    move_refs,
    read_refs,
    read_tree,
)
from apps.packages.services.git.bundles import export_bundle, import_bundle
from apps.packages.services.git.refs import RefMoved
from kody import blobs
from tests.kernel.test_blobs import fs_buckets, s3_buckets, s3_endpoint  # noqa: F401

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
AUTHOR = Author("Ada", "ada@example.com")


@pytest.fixture(params=["filesystem", "s3"])
def backend(request):
    return request.getfixturevalue("fs_buckets" if request.param == "filesystem" else "s3_buckets")


def test_commits_round_trip_through_the_bucket(backend, tmp_path: Path):
    one = commit_files(
        "repo-a", {"a.txt": b"one", "d/b.txt": b"bee"}, parent=None, message="one", author=AUTHOR
    )
    two = commit_files(
        "repo-a", {"a.txt": b"two", "d/b.txt": b"bee"}, parent=one, message="two", author=AUTHOR
    )
    move_refs("repo-a", [("refs/heads/main", None, two)])
    assert read_tree("repo-a", two) == {"a.txt": b"two", "d/b.txt": b"bee"}
    assert read_tree("repo-a", one)["a.txt"] == b"one"
    assert is_ancestor(BucketObjectStore("repo-a"), one, two)
    assert not is_ancestor(BucketObjectStore("repo-a"), two, one)
    keys = list(blobs.list_prefix("source_repos", "repo-a/pack/"))
    assert keys and all(k.endswith((".pack", ".idx")) for k in keys)

    with pytest.raises(RefMoved):  # a stale expectation moves nothing
        move_refs("repo-a", [("refs/heads/main", one, one)])
    assert read_refs("repo-a") == {"refs/heads/main": two}

    bundle = tmp_path / "a.bundle"
    assert export_bundle("repo-a", bundle)
    assert import_bundle("repo-b", bundle) == 1
    assert read_tree("repo-b", two) == read_tree("repo-a", two)

    delete_repo("repo-a")
    assert list(blobs.list_prefix("source_repos", "repo-a/")) == []
    assert read_refs("repo-a") == {} and read_refs("repo-b") == {"refs/heads/main": two}
