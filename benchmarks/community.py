"""``communitySearch`` over a large catalog, beside a plain indexed query (issue 38).

Builds ``--listings`` listings (default 10,000) owned by ``--owners`` accounts, of which
``--delisted`` are delisted and one owner (``--banned-listings`` of the listings) is banned,
with their community vectors; then times ``--queries`` searches through the service the
capability calls (vector candidates, text match, visibility, boosts, usernames) and, in the
same run, a plain query on the same table through its browse index
(``status, category, published_at``). Prints p50/p99 of both and what the search returned.

    .venv/bin/python benchmarks/community.py [--listings 10000] [--queries 200]

The rows stay in the benchmark database (test_kody_bench) for reruns with ``--reuse``.
"""

from __future__ import annotations

import argparse
import os
import random
import time

from _accounts import live_account_ids
from _harness import pct, setup_django

WORDS = (
    "weather forecast calendar notes email github issues slack digest invoice budget "
    "translate summary recipe fitness reminder travel flight hotel stock crypto news "
    "podcast photo resize pdf convert spreadsheet backup deploy monitor uptime alert"
).split()
CATEGORIES = ("integrations", "examples", "productivity", "apps", "utilities", "other")


def build(listings: int, owners: int, delisted: int, banned_listings: int) -> None:
    from django.db import transaction

    from apps.community.models import CommunityBan, CommunityListing
    from kody import embeddings
    from kody.vectors import index

    rng = random.Random(38)
    owner_ids = live_account_ids(owners)
    banned = owner_ids[0]
    rows = []
    for n in range(listings):
        words = rng.sample(WORDS, 4)
        owner = banned if n < banned_listings else owner_ids[1 + n % (owners - 1)]
        name = f"{words[0]}-{words[1]}-{n}"
        text = f"@x/{name}\nA {' '.join(words)} helper.\n{' '.join(words)}"
        rows.append(
            CommunityListing(
                owner_user_id=owner,
                package_id=f"bench-pkg-{n}",
                source_id=f"bench-src-{n}",
                kody_id=f"@bench/{name}",
                name=name,
                description=f"A {' '.join(words)} helper.",
                tags_json=words[:2],
                category=CATEGORIES[n % len(CATEGORIES)],
                search_text=text,
                pinned_commit="0" * 40,
                status="delisted"
                if banned_listings <= n < banned_listings + delisted
                else "active",
            )
        )
    with transaction.atomic():
        CommunityListing.objects.bulk_create(rows, batch_size=1000)
        CommunityBan.objects.create(user_id=banned, banned_by_user_id="bench", reason="bench")
    for start in range(0, len(rows), 500):
        chunk = rows[start : start + 500]
        vectors = embeddings.embed([r.search_text for r in chunk])
        for row, vector in zip(chunk, vectors, strict=True):
            index.upsert_community(
                row.owner_user_id, index.Item(row.id, vector, {"kind": "community_listing"})
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--listings", type=int, default=10_000)
    parser.add_argument("--owners", type=int, default=200)
    parser.add_argument("--delisted", type=int, default=1_000)
    parser.add_argument("--banned-listings", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--reuse", action="store_true", help="keep an earlier run's catalog")
    options = parser.parse_args()
    setup_django()
    from django.db import connection
    from django.db.models import Q

    from apps.community.models import CommunityBan, CommunityListing
    from apps.community.services.search import search
    from kody import embeddings

    if (
        not options.reuse
        or not CommunityListing.objects.filter(package_id__startswith="bench-").exists()
    ):
        started = time.perf_counter()
        build(options.listings, options.owners, options.delisted, options.banned_listings)
        print(f"built {options.listings} listings in {time.perf_counter() - started:.1f} s")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE community_listings")
        cursor.execute("ANALYZE kody_vectors")
    embeddings.embed(["warm up"])
    rng = random.Random(7)
    queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(options.queries)]
    for q in queries[:5]:
        search(q)  # warm caches and the HNSW pages

    hybrid, plain, shown, hidden_seen = [], [], 0, 0
    banned = CommunityBan.objects.values("user_id")
    hidden = set(
        CommunityListing.objects.filter(
            Q(status="delisted") | Q(owner_user_id__in=banned)
        ).values_list("id", flat=True)
    )
    for q in queries:
        t = time.perf_counter()
        found = search(q, limit=20)
        hybrid.append(time.perf_counter() - t)
        shown += len(found["results"])
        hidden_seen += sum(1 for r in found["results"] if r["listingId"] in hidden)
        category = rng.choice(CATEGORIES)
        t = time.perf_counter()
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT id, kody_id, name FROM community_listings WHERE status = 'active'"
                " AND category = %s ORDER BY published_at DESC LIMIT 20",
                [category],
            )
            cursor.fetchall()
        plain.append(time.perf_counter() - t)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"load average {load}; {len(queries)} queries; {shown} results, {hidden_seen} hidden shown"
    )
    for label, samples in (("communitySearch", hybrid), ("plain indexed query", plain)):
        p50, p99 = pct(samples, 0.5) * 1000, pct(samples, 0.99) * 1000
        print(f"{label}: p50 {p50:.2f} ms  p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
