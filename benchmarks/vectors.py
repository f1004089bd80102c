"""Vector search at scale: HNSW recall against exact search, query latency, reindex speed.

    python benchmarks/vectors.py [--main 100000] [--spread 100000] [--namespaces 1000]
                                 [--queries 200] [--memories 5000]

1. Loads ``--main`` vectors into one user's namespace and ``--spread`` more over
   ``--namespaces`` other users (COPY, then the HNSW index is rebuilt as the migration defines
   it). The vectors are real WordLlama embeddings of synthetic memory-like texts, so they
   cluster the way product data does (uniform random vectors would flatter nothing).
2. For ``--queries`` query texts: the product query path (``kody.vectors.index.query``: the
   namespace, owner and model filters) against exact top-10 computed in NumPy from the same
   vectors. Prints recall@10 (target ≥ 0.95) and p50/p99 latency, for the big namespace and a
   small one, at the default ``hnsw.ef_search`` and with iterative index scans when the
   installed pgvector has them.
3. ``manage.py reindex --kind memory --force`` over ``--memories`` memories: rows/s, and the
   same run again without ``--force`` (everything skipped) for the fingerprint speed-up.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import time

import numpy as np
from _harness import pct, setup_django

WORDS = (
    "tea coffee morning meeting project deadline invoice client travel hotel flight lisbon "
    "berlin tokyo python rust deploy server database backup password reminder birthday gift "
    "dentist doctor gym running cycling recipe dinner vegetarian allergy peanuts garden dog "
    "cat school kids homework budget taxes rent mortgage insurance car repair bike holiday "
    "concert jazz book novel podcast editor neovim github review release bug feature design "
    "weekly monthly daily report email inbox newsletter friend family parents anniversary"
).split()


def texts(n: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choices(WORDS, k=rng.randint(4, 9))) + f" #{i}" for i in range(n)]


def load(namespace_sizes: dict[str, int], rng: random.Random, reuse: bool) -> dict[str, np.ndarray]:
    from django.db import connection

    from kody.embeddings import embed, model_tag
    from kody.vectors.models import VectorEntry

    tag = model_tag()
    vectors: dict[str, np.ndarray] = {}
    if reuse and VectorEntry.objects.count() == sum(namespace_sizes.values()):
        # The same seed makes the same texts, so the same vectors as the loaded ones.
        for namespace, size in namespace_sizes.items():
            vectors[namespace] = np.asarray(embed(texts(size, rng)), dtype=np.float32)
        return vectors
    with connection.cursor() as cur:
        cur.execute("TRUNCATE kody_vectors")
        cur.execute("DROP INDEX IF EXISTS kody_vectors_embedding_hnsw")
        with cur.copy(
            "COPY kody_vectors (namespace, vector_id, owner_user_id, embedding, metadata, model,"
            " updated_at) FROM STDIN"
        ) as copy:
            for namespace, size in namespace_sizes.items():
                matrix = np.asarray(embed(texts(size, rng)), dtype=np.float32)
                vectors[namespace] = matrix
                meta = json.dumps({"kind": "memory", "userId": namespace, "status": "active"})
                for i, row in enumerate(matrix):
                    literal = "[" + ",".join(f"{x:.6f}" for x in row) + "]"
                    copy.write_row(
                        (namespace, f"memory_{i}", namespace, literal, meta, tag, "now()")
                    )
        started = time.perf_counter()
        cur.execute("SET maintenance_work_mem = '512MB'")
        cur.execute(
            "CREATE INDEX kody_vectors_embedding_hnsw ON kody_vectors USING hnsw "
            "(embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)"
        )
        cur.execute("ANALYZE kody_vectors")
        print(
            f"HNSW index built over {sum(namespace_sizes.values())} vectors "
            f"in {time.perf_counter() - started:.1f} s"
        )
    return vectors


def exact_top10(matrix: np.ndarray, query: np.ndarray) -> set[str]:
    scores = matrix @ query
    return {f"memory_{i}" for i in np.argsort(-scores)[:10]}


def measure(namespace: str, matrix: np.ndarray, queries: np.ndarray, ef_search: int) -> tuple:
    from django.conf import settings

    from kody.vectors import index

    settings.KODY_VECTOR_EF_SEARCH = ef_search
    recalls, times = [], []
    for query in queries:
        started = time.perf_counter()
        found = index.query(namespace, query.tolist(), top_k=10)
        times.append(time.perf_counter() - started)
        got = {m.vector_id for m in found}
        recalls.append(len(got & exact_top10(matrix, query)) / 10)
    return float(np.mean(recalls)), pct(times, 0.5) * 1000, pct(times, 0.99) * 1000


def pgvector_version() -> tuple[int, ...]:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        return tuple(int(p) for p in cur.fetchone()[0].split("."))


def search_section(args: argparse.Namespace, rng: random.Random) -> None:
    from kody.embeddings import embed

    main_ns = "a" * 64
    sizes = {main_ns: args.main}
    per = max(1, args.spread // args.namespaces)
    for i in range(args.namespaces):
        sizes[f"{i:064x}"] = per
    vectors = load(sizes, rng, args.reuse)
    queries = np.asarray(embed(texts(args.queries, random.Random(7))), dtype=np.float32)
    small_ns = f"{0:064x}"
    from django.conf import settings

    product = settings.KODY_VECTOR_EF_SEARCH
    efs = [(f"ef_search {ef}" + (" (product)" if ef == product else ""), ef) for ef in (40, 100)]
    if product not in (40, 100):
        efs.append((f"ef_search {product} (product)", product))
    print(
        f"pgvector {'.'.join(map(str, pgvector_version()))}; load average {os.getloadavg()[0]:.2f}"
    )
    print(f"{'namespace':22} {'setting':32} {'recall@10':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for label, ns in ((f"big ({args.main})", main_ns), (f"small ({per})", small_ns)):
        for name, ef in efs:
            recall, p50, p99 = measure(ns, vectors[ns], queries, ef)
            print(f"{label:22} {name:32} {recall:9.3f} {p50:8.2f} {p99:8.2f}")


def reindex_section(args: argparse.Namespace) -> None:
    from django.core.management import call_command

    from apps.accounts.models import User
    from apps.packages.models import McpMemory, VectorEmbedFingerprint
    from kody.embeddings import embed
    from kody.vectors import index

    # One account, so --user keeps the orphan sweep off the search section's vectors.
    user = User.objects.filter(email="bench@example.com").first() or User.objects.create_user(
        username="bench", email="bench@example.com", password="bench-password-123"
    )

    def clean() -> None:
        McpMemory.objects.filter(user_id=user.stable_user_id).delete()
        VectorEmbedFingerprint.objects.filter(user_id=user.stable_user_id).delete()
        index.delete_all_for_user(user.stable_user_id)

    clean()
    embed(["load the model before timing"])
    McpMemory.objects.bulk_create(
        [
            McpMemory(user_id=user.stable_user_id, subject=t[:60], summary=t)
            for t in texts(args.memories, random.Random(3))
        ],
        batch_size=2000,
    )
    for label, extra in (("--force (embed all)", ["--force"]), ("again (all skipped)", [])):
        out = io.StringIO()
        started = time.perf_counter()
        call_command(
            "reindex",
            "--kind",
            "memory",
            "--user",
            user.email,
            *extra,
            stdout=out,
            stderr=io.StringIO(),
        )
        seconds = time.perf_counter() - started
        print(
            f"reindex {label:22} {args.memories / seconds:9.0f} rows/s   {out.getvalue().strip()}"
        )
    clean()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--main", type=int, default=100_000)
    parser.add_argument("--spread", type=int, default=100_000)
    parser.add_argument("--namespaces", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--reuse", action="store_true", help="keep vectors loaded by a last run")
    args = parser.parse_args()
    setup_django()
    rng = random.Random(1)
    search_section(args, rng)
    reindex_section(args)


if __name__ == "__main__":
    main()
