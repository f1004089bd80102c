"""Git bundles of one repo: what ``export_account`` writes per repo and the import restores,
so an imported account keeps every repo's full history."""

from __future__ import annotations

from pathlib import Path

from dulwich.bundle import create_bundle_from_repo, read_bundle, write_bundle
from dulwich.object_store import MemoryObjectStore

from apps.packages.services.git import refs as refs_mod
from apps.packages.services.git.objects import BucketObjectStore
from apps.packages.services.git.repo import SourceRepo


def export_bundle(repo_id: str, path: Path) -> bool:
    """Write ``path`` (every ref and the objects they reach); False for a repo with no refs."""
    repo = SourceRepo(repo_id)
    names = [name.encode() for name in refs_mod.read_refs(repo_id)]
    if not names:
        return False
    # HEAD too, so ``git clone x.bundle`` checks out the default branch.
    with (
        create_bundle_from_repo(repo, refs=[b"HEAD", *names]) as bundle,
        open(path, "wb") as handle,
    ):
        write_bundle(handle, bundle)
    return True


def import_bundle(repo_id: str, path: Path) -> int:
    """Load a bundle into an empty repo: its objects, then its refs; returns how many refs."""
    with open(path, "rb") as handle, read_bundle(handle) as bundle:
        staged = MemoryObjectStore()  # the bucket store takes whole packs, not single objects
        bundle.store_objects(staged)
        objects = [(staged[sha], None) for sha in staged]
        if objects:
            BucketObjectStore(repo_id).add_objects(objects)
        updates = [
            (name.decode(), None, sha.decode())
            for name, sha in bundle.references.items()
            if name != b"HEAD"  # always the symbolic ref to main here
        ]
    refs_mod.move_refs(repo_id, updates)
    return len(updates)
