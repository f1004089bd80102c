"""``git-receive-pack`` with Kody's push rules, all checked before anything is stored.

The incoming (thin) pack is completed in a temporary local object store that falls back to the
repo's bucket for delta bases; the rules are checked against that overlay; only then is the
pack uploaded and the refs moved with a compare-and-swap in Postgres. A refused push stores no
pack and moves no ref.

Rules: at most ``MAX_PACK_BYTES`` on the wire and ``MAX_FILE_BYTES`` per file; only
``refs/heads/*`` and ``refs/tags/*``; no non-fast-forward branch update (force push); no moving
or re-pointing a tag; the default branch cannot be deleted; the packs must fit the owner's
``storage_bytes`` (they then count in the repo's ``git:<repo id>`` inventory row).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
import zlib
from collections.abc import Iterator

from django.db.models import F
from django.db.models.functions import Coalesce
from django.utils import timezone
from dulwich.errors import ApplyDeltaError, ChecksumMismatch, ObjectFormatException
from dulwich.object_store import DiskObjectStore, OverlayObjectStore, PackInputTooLarge
from dulwich.objects import Blob, Commit
from dulwich.server import ReceivePackHandler

from apps.accounts import policy
from apps.entitlements.services import LimitReached
from apps.packages.models import UserStorageBucket
from apps.packages.models.runtime import StorageBucketKind
from apps.packages.services.git import refs as refs_mod
from apps.packages.services.git.objects import BucketObjectStore
from apps.packages.services.git.repo import is_ancestor

log = logging.getLogger(__name__)

MAX_FILE_BYTES = 10 * 1024 * 1024
MAX_PACK_BYTES = 100 * 1024 * 1024
ZERO = b"0" * 40


class StagingStore(DiskObjectStore):
    """A throwaway local store whose delta bases may come from the repo's bucket."""

    base: BucketObjectStore

    def get_raw(self, name):  # type: ignore[no-untyped-def]
        try:
            return super().get_raw(name)
        except KeyError:
            return self.base.get_raw(name)


class GuardedReceivePack(ReceivePackHandler):
    """Dulwich's receive-pack protocol with our own apply step."""

    def _apply_pack(self, refs):  # type: ignore[no-untyped-def]
        commands = [(old, new, name) for old, new, name in refs]
        yield from apply_push(
            self.repo.object_store,
            self.repo.repo_id,
            commands,
            self.proto,
            owner_id=getattr(self.repo, "owner_id", None),
        )


def _refuse_all(commands: list, unpack: bytes, reason: bytes) -> Iterator[tuple[bytes, bytes]]:
    yield (b"unpack", unpack)
    for _old, _new, name in commands:
        yield (name, reason)


def apply_push(
    base: BucketObjectStore,
    repo_id: str,
    commands: list,
    proto: object,
    *,
    owner_id: str | None = None,
) -> Iterator[tuple[bytes, bytes]]:
    started = time.perf_counter()
    marks: dict[str, float] = {}
    try:
        yield from _apply_push(base, repo_id, commands, proto, marks, owner_id)
    finally:
        spans = " ".join(f"{k}_ms={v * 1000:.0f}" for k, v in marks.items())
        log.info(
            "push repo=%s refs=%d %s total_ms=%.0f",
            repo_id,
            len(commands),
            spans,
            (time.perf_counter() - started) * 1000,
        )


def _apply_push(
    base: BucketObjectStore,
    repo_id: str,
    commands: list,
    proto: object,
    marks: dict,
    owner_id: str | None,
) -> Iterator[tuple[bytes, bytes]]:
    sends_pack = any(new != ZERO for _old, new, _name in commands)
    clock = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="kody-push-") as tmp:
        staging = StagingStore.init(os.path.join(tmp, "objects"))
        staging.base = base
        if sends_pack:
            try:
                staging.add_thin_pack(
                    proto.read,  # type: ignore[attr-defined]
                    getattr(proto, "recv", None),
                    max_input_size=MAX_PACK_BYTES,
                )
            except PackInputTooLarge:
                limit = f"push refused: the pack is over {MAX_PACK_BYTES // (1 << 20)} MiB"
                yield from _refuse_all(commands, limit.encode(), b"pack too large")
                return
            except (OSError, ChecksumMismatch, ApplyDeltaError, ObjectFormatException, zlib.error):
                log.info("push to %s: unreadable pack", repo_id, exc_info=True)
                yield from _refuse_all(commands, b"unreadable pack", b"unpacker error")
                return
        marks["unpack"] = time.perf_counter() - clock
        clock = time.perf_counter()
        overlay = OverlayObjectStore([staging, base])
        problem = _too_big_file(staging)
        if problem:
            yield from _refuse_all(commands, b"ok", problem)
            return
        current = {k.encode(): v.encode() for k, v in refs_mod.read_refs(repo_id).items()}
        verdicts = [_verdict(overlay, current, old, new, name) for old, new, name in commands]
        if any(v != b"ok" for v in verdicts):
            # All or nothing: one refused ref refuses the push, so refs never half-move.
            yield (b"unpack", b"ok")
            for (_old, _new, name), verdict in zip(commands, verdicts, strict=True):
                yield (name, verdict if verdict != b"ok" else b"atomic push failed")
            return
        marks["rules"] = time.perf_counter() - clock
        # The packs are stored bytes: held in the meter before upload (over the plan's
        # storage_bytes the whole push is refused and nothing is uploaded), then carried by
        # the repo's inventory row once the refs moved.
        grown = pack_bytes(staging) if owner_id else 0
        try:
            policy.reserve_storage_bytes(owner_id, grown)
        except LimitReached:
            yield from _refuse_all(commands, b"ok", b"storage limit reached for your plan")
            return
        try:
            clock = time.perf_counter()
            uploaded = [_upload(staging, base, pack) for pack in staging.packs]
            marks["store"] = time.perf_counter() - clock
            updates = [
                (
                    name.decode(),
                    None if old == ZERO else old.decode(),
                    None if new == ZERO else new.decode(),
                )
                for old, new, name in commands
            ]
            try:
                refs_mod.move_refs(repo_id, updates)
            except refs_mod.RefMoved:
                for name in uploaded:
                    if name:
                        base._remove_pack_by_name(name)
                yield from _refuse_all(commands, b"ok", b"fetch first: the ref moved meanwhile")
                return
            if owner_id and grown:
                add_pushed_bytes(owner_id, repo_id, grown)
        finally:
            policy.release_storage_bytes(owner_id, grown)
    yield (b"unpack", b"ok")
    for _old, _new, name in commands:
        yield (name, b"ok")


def _upload(staging: DiskObjectStore, base: BucketObjectStore, pack: object) -> str | None:
    path = pack._basename  # type: ignore[attr-defined]
    name = os.path.basename(path)
    with open(path + ".pack", "rb") as data, open(path + ".idx", "rb") as index:
        return name if base.upload(name, data, index) else None


def _too_big_file(staging: DiskObjectStore) -> bytes | None:
    for pack in staging.packs:
        for sha in pack:
            type_num, raw = pack.get_raw(sha)
            if type_num == Blob.type_num and len(raw) > MAX_FILE_BYTES:
                mib = MAX_FILE_BYTES // (1 << 20)
                return f"file {sha.decode()[:12]} is over the {mib} MiB per-file limit".encode()
    return None


def _verdict(overlay: object, current: dict, old: bytes, new: bytes, name: bytes) -> bytes:
    is_branch, is_tag = name.startswith(b"refs/heads/"), name.startswith(b"refs/tags/")
    if not (is_branch or is_tag) or b".." in name or name.endswith(b"/"):
        return b"only refs/heads/* and refs/tags/* may be pushed"
    existing = current.get(name, ZERO)
    if existing != old:
        return b"fetch first: the ref moved meanwhile"
    if new == ZERO:
        if name == refs_mod.HEAD_REF.encode():
            return b"the default branch cannot be deleted"
        return b"ok"
    try:
        obj = overlay[new]  # type: ignore[index]
    except KeyError:
        return b"missing objects"
    if is_branch and not isinstance(obj, Commit):
        return b"a branch must point at a commit"
    if is_branch:
        try:
            overlay[obj.tree]  # type: ignore[index,attr-defined]
        except KeyError:  # (dulwich's overlay ``in`` misses packed objects, so look it up)
            return b"missing objects"
    if old != ZERO:
        if is_tag:
            return b"tags cannot be moved"
        if not is_ancestor(overlay, old.decode(), new.decode()):
            return b"non-fast-forward: force pushes are refused"
    return b"ok"


def pack_bytes(staging: DiskObjectStore) -> int:
    return sum(os.path.getsize(pack._basename + ".pack") for pack in staging.packs)  # type: ignore[attr-defined]


def pushed_storage_id(repo_id: str) -> str:
    return f"git:{repo_id}"


def add_pushed_bytes(user_id: str, repo_id: str, n: int) -> None:
    """Grow the repo's inventory row (check-only storage estimate) by a push's packs."""
    now = timezone.now()
    row, created = UserStorageBucket.objects.get_or_create(
        user_id=user_id,
        storage_id=pushed_storage_id(repo_id),
        defaults={
            "kind": StorageBucketKind.SOURCE,
            "last_seen_at": now,
            "estimated_bytes": n,
            "estimated_bytes_updated_at": now,
        },
    )
    if not created:
        UserStorageBucket.objects.filter(pk=row.pk).update(
            estimated_bytes=Coalesce(F("estimated_bytes"), 0) + n,
            last_seen_at=now,
            estimated_bytes_updated_at=now,
        )
