"""``git-upload-pack`` that sends stored objects as they are.

dulwich's stock handler inflates and re-deflates every non-delta object it sends, which made
a clone several times slower than plain git (benchmarks/git.py). This handler copies each
object's compressed bytes straight out of the repo's packs (deltas too, as REF_DELTA, when
their base is also being sent) and builds only the rest; the protocol is dulwich's.
Partial clone filters are not offered.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from dulwich.objects import sha_to_hex
from dulwich.pack import (
    REF_DELTA,
    UnpackedObject,
    full_unpacked_object,
    pack_object_header,
    write_pack_data,
)
from dulwich.protocol import CAPABILITY_FILTER, CAPABILITY_NO_DONE
from dulwich.server import UploadPackHandler, _ProtocolGraphWalker


def reused_records(store: Any, object_ids: Sequence[tuple[bytes, Any]]) -> Iterator[UnpackedObject]:
    todo = dict(object_ids)
    sending = set(todo)
    fmt = store.object_format
    for unpacked in store.iter_unpacked_subset(
        sending, include_comp=True, allow_missing=True, convert_ofs_delta=True
    ):
        base = unpacked.delta_base
        if unpacked.pack_type_num == REF_DELTA and sha_to_hex(base) not in sending:
            continue  # its base stays behind: sent whole below
        if unpacked.comp_chunks is None:
            continue
        # The chunk writer reuses compressed chunks verbatim, header included: prepend it.
        header = pack_object_header(
            unpacked.pack_type_num, base, unpacked.decomp_len, object_format=fmt
        )
        unpacked.comp_chunks = [bytes(header), *unpacked.comp_chunks]
        del todo[sha_to_hex(unpacked.sha())]
        yield unpacked
    for oid in list(todo):
        yield full_unpacked_object(store[oid])


class ReusingUploadPack(UploadPackHandler):
    def capabilities(self) -> list[bytes]:
        return [c for c in super().capabilities() if c != CAPABILITY_FILTER]

    def handle(self) -> None:
        self._processing_have_lines = True
        store = self.repo.object_store
        walker = _ProtocolGraphWalker(self, store, self.repo.get_peeled, self.repo.refs.get_symrefs)
        wants: list[bytes] = []

        def wants_wrapper(refs: Any, depth: int | None = None) -> list[bytes]:
            wants.extend(walker.determine_wants(refs, depth))
            return wants

        missing = self.repo.find_missing_objects(
            wants_wrapper, walker, self.progress, get_tagged=self.get_tagged
        )
        if not wants or missing is None:
            return
        object_ids = list(missing)
        if not walker.handle_done(not self.has_capability(CAPABILITY_NO_DONE), self._done_received):
            return
        self._start_pack_send_phase()
        self.progress(f"counting objects: {len(object_ids)}, done.\n".encode("ascii"))
        write_pack_data(
            self.write_pack_data,
            reused_records(store, object_ids),
            store.object_format,
            num_records=len(object_ids),
        )
        self.proto.write_pkt_line(None)
