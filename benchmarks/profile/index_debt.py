"""A memory write's latency with its vector embedded inline vs deferred to search-index debt.

Four runs of ``--writes`` memory upserts (one transaction each), p50/p99 per run and the
ratio to the baseline (inline, default WordLlama) measured in the same run:

* inline + WordLlama (the baseline; the default in ``auto`` mode)
* deferred + WordLlama (the write records debt; no embedding)
* inline + a slow model (WordLlama plus ``--slow-ms`` of sleep per call, standing in for a
  transformer on CPU)
* deferred + the slow model, then the time the drain takes per row

It also prints WordLlama's p50 for a one-text call, which ``KODY_EMBED_MODE=auto`` compares
with ``KODY_EMBED_INLINE_BUDGET_MS``.

    .venv/bin/python benchmarks/profile/index_debt.py --writes 60
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/, for its helpers

import argparse
import time

from _harness import pct, setup_django


class SlowEmbedder:
    def __init__(self, inner, delay_s: float) -> None:  # type: ignore[no-untyped-def]
        self.inner, self.delay_s = inner, delay_s
        self.model, self.dimensions, self.version = inner.model, inner.dimensions, inner.version

    def embed(self, texts):  # type: ignore[no-untyped-def]
        time.sleep(self.delay_s)
        return self.inner.embed(texts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=60)
    parser.add_argument("--slow-ms", type=float, default=50.0)
    args = parser.parse_args()
    setup_django()

    from _accounts import live_account_ids
    from django.conf import settings

    from apps.packages.models import McpMemory, SearchIndexDebt, VectorEmbedFingerprint
    from apps.packages.services import index_debt, memories, search_index
    from kody.embeddings import get_embedder

    fast = get_embedder()
    slow = SlowEmbedder(fast, args.slow_ms / 1000)
    [user_id] = live_account_ids(1)
    fast.embed(["warm up"])  # load the model outside any timing
    from kody.vectors.models import VectorEntry

    print(f"kody_vectors holds {VectorEntry.objects.count()} rows (the HNSW graph inserts go into)")

    single = []
    for i in range(args.writes):
        started = time.perf_counter()
        fast.embed([f"one short memory text number {i}"])
        single.append(time.perf_counter() - started)
    print(f"wordllama one-text call p50={pct(single, 0.5) * 1000:.3f}ms")

    def writes(mode: str, embedder, label: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
        settings.KODY_EMBED_MODE = mode
        search_index.get_embedder = lambda: embedder  # type: ignore[assignment]
        samples = []
        for i in range(args.writes):
            started = time.perf_counter()
            memories.upsert(user_id, subject=f"{label} fact {i}", summary=f"detail {i} {label}")
            samples.append(time.perf_counter() - started)
        return pct(samples, 0.5), pct(samples, 0.99)

    index_debt._kick = lambda user_id: None  # no broker here: drains are timed below
    baseline = writes("inline", fast, "inline-fast")
    rows = [
        ("inline + wordllama (baseline)", baseline),
        ("deferred + wordllama", writes("deferred", fast, "deferred-fast")),
        (f"inline + slow model ({args.slow_ms:.0f} ms)", writes("inline", slow, "inline-slow")),
        (f"deferred + slow model ({args.slow_ms:.0f} ms)", writes("deferred", slow, "defer-slow")),
    ]
    for label, (p50, p99) in rows:
        print(
            f"{label:36s} p50={p50 * 1000:7.2f}ms p99={p99 * 1000:7.2f}ms "
            f"ratio_p50={p50 / baseline[0]:.2f}x"
        )
    pending = SearchIndexDebt.objects.count()
    started = time.perf_counter()
    while index_debt.drain(limit=200).handled:
        pass
    drained_s = time.perf_counter() - started
    print(
        f"drain: {pending} debt rows in {drained_s:.2f}s "
        f"({drained_s / max(pending, 1) * 1000:.1f} ms/row, slow model batches per user)"
    )
    McpMemory.objects.filter(user_id=user_id).delete()
    VectorEntry.objects.filter(namespace=user_id).delete()
    VectorEmbedFingerprint.objects.filter(user_id=user_id).delete()


if __name__ == "__main__":
    main()
