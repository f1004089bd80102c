"""A dulwich object store whose packs are blobs in the ``source_repos`` storage.

Every write is a whole pack (``.pack`` then ``.idx``; a pack is visible only once its index
exists), so the store needs nothing but put, get, list and delete from the blob backend and
scales out with it. On the filesystem backend packs are opened in place (memory-mapped); on S3
they are downloaded on first use by each opened store.
"""

from __future__ import annotations

import os
import posixpath
import tempfile
from collections.abc import Iterator
from typing import BinaryIO

from django.core.files import File
from django.core.files.storage import FileSystemStorage
from dulwich.object_format import DEFAULT_OBJECT_FORMAT
from dulwich.object_store import BucketBasedObjectStore
from dulwich.pack import (
    PACK_SPOOL_FILE_MAX_SIZE,
    Pack,
    PackData,
    PackIndex,
    load_pack_index_file,
)

from kody.blobs import bucket, delete_keys, list_prefix
from kody.blobs.keys import source_repo_prefix

BUCKET = "source_repos"


def repo_prefix(repo_id: str) -> str:
    return source_repo_prefix(repo_id)


class BucketObjectStore(BucketBasedObjectStore):
    def __init__(self, repo_id: str) -> None:
        super().__init__(object_format=DEFAULT_OBJECT_FORMAT)
        self.repo_id = repo_id
        self.prefix = repo_prefix(repo_id) + "pack/"
        self.storage = bucket(BUCKET)

    def __repr__(self) -> str:
        return f"BucketObjectStore({self.repo_id!r})"

    def _iter_pack_names(self) -> Iterator[str]:
        seen: dict[str, set[str]] = {}
        for key in list_prefix(BUCKET, self.prefix):
            name, ext = posixpath.splitext(posixpath.basename(key))
            seen.setdefault(name, set()).add(ext)
        for name, exts in seen.items():
            if {".pack", ".idx"} <= exts:
                yield name

    def pack_keys(self, name: str) -> list[str]:
        return [f"{self.prefix}{name}.pack", f"{self.prefix}{name}.idx"]

    def _local(self) -> bool:
        return isinstance(self.storage, FileSystemStorage)

    def _get_pack(self, name: str) -> Pack:
        if self._local():
            base = self.storage.path(self.prefix + name)
            return Pack(base, object_format=self.object_format)
        return Pack.from_lazy_objects(lambda: self._load_data(name), lambda: self._load_index(name))

    def _download(self, key: str) -> BinaryIO:
        spool = tempfile.SpooledTemporaryFile(max_size=PACK_SPOOL_FILE_MAX_SIZE)
        with self.storage.open(key, "rb") as source:
            while chunk := source.read(1 << 20):
                spool.write(chunk)
        spool.seek(0)
        return spool  # type: ignore[return-value]

    def _load_data(self, name: str) -> PackData:
        return PackData(
            name + ".pack", self.object_format, self._download(f"{self.prefix}{name}.pack")
        )

    def _load_index(self, name: str) -> PackIndex:
        return load_pack_index_file(
            name + ".idx", self._download(f"{self.prefix}{name}.idx"), self.object_format
        )

    def _upload_pack(self, basename: str, pack_file: BinaryIO, index_file: BinaryIO) -> None:
        self.upload(basename, pack_file, index_file)

    def upload(self, basename: str, pack_file: BinaryIO, index_file: BinaryIO) -> bool:
        """Store one pack; False when a pack of that name (the same objects) is already there."""
        pack_key, index_key = self.pack_keys(basename)
        if self.storage.exists(index_key):
            return False
        # Index last: a listing shows the pack only once both halves exist.
        self._put(pack_key, pack_file)
        self._put(index_key, index_file)
        return True

    def _put(self, key: str, handle: BinaryIO) -> None:
        if self._local():
            path = self.storage.path(key)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".incoming-")
            with os.fdopen(fd, "wb") as out:
                while chunk := handle.read(1 << 20):
                    out.write(chunk)
            os.replace(tmp, path)
            return
        self.storage.save(key, File(handle))

    def _remove_pack_by_name(self, name: str) -> None:
        self._pack_cache.pop(name, None)
        delete_keys(BUCKET, self.pack_keys(name)[::-1])
