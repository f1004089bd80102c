"""Deleting a big account, and what it does to everyone else's meter calls, in one run.

    REDIS_URL=redis://127.0.0.1:6379/3 python benchmarks/deletion.py [--scale 0.1]

Seeds one user with 100k public rows (spread over value_buckets/value_entries, mcp_memories,
jobs, usage_events and access_tokens), 10k Mailbox messages (written in bulk into the
Mailbox actor's own tables, see ``seed_mailbox``) and 10k blobs (each message's raw MIME under
``email-raw:v1:{userId}/``), then runs the real deletion job (``job.run(job.start(...))``)
with every actor call going through the shard queue to a real shard worker.

Meanwhile other users' ``UserMeter.consume`` calls run in a closed loop from a separate process:
one caller for a user whose meter shares the victim's shard, one for a user on another shard.
The same loop runs before and after the deletion as the baseline. Prints the deletion's wall
time per step, meter p50/p99 without and during the deletion, and the ratio (target: p99
during <= 1.5x without). Timings are printed, never asserted. ``--scale`` multiplies every
count (0.1 for a quick run).
Runs on the benchmark database (``test_kody_bench``) with fresh users each time; blobs go to a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import secrets
import tempfile
import threading
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from _harness import row, setup_django, shard_worker, summary

DAY = "2026-11-29"
LIMIT = 10**12
BATCH = 5000

# The 100k public rows at scale 1, by table.
PUBLIC_ROWS = {
    "value_buckets": 1_000,
    "value_entries": 39_000,
    "mcp_memories": 25_000,
    "jobs": 10_000,
    "usage_events": 20_000,
    "access_tokens": 5_000,
}
MESSAGES = 10_000


# --- seeding ------------------------------------------------------------------------------


def make_user(tag: str) -> Any:
    from apps.accounts.models import User

    suffix = secrets.token_hex(6)
    return User.objects.create_user(
        username=f"bench-{tag}-{suffix}", email=f"bench-{tag}-{suffix}@example.test", password=None
    )


def seed_public_rows(user: Any, counts: dict[str, int]) -> int:
    from django.utils import timezone

    from apps.accounts.models import AccessToken
    from apps.entitlements.models import UsageEvent
    from apps.jobs.models import Job
    from apps.packages.models import McpMemory, ValueBucket, ValueEntry

    uid = user.stable_user_id
    now = timezone.now()
    buckets = [
        ValueBucket(id=uuid.uuid4().hex, user_id=uid, scope="user", binding_key=f"b{n}")
        for n in range(counts["value_buckets"])
    ]
    ValueBucket.objects.bulk_create(buckets, batch_size=BATCH)
    per_bucket = -(-counts["value_entries"] // max(len(buckets), 1))
    entries = (
        ValueEntry(bucket_id=buckets[n // per_bucket].id, name=f"e{n}", value="x" * 40)
        for n in range(counts["value_entries"])
    )
    _bulk(ValueEntry, entries)
    _bulk(
        McpMemory,
        (
            McpMemory(id=uuid.uuid4().hex, user_id=uid, subject=f"memory {n}", details="d" * 80)
            for n in range(counts["mcp_memories"])
        ),
    )
    _bulk(
        Job,
        (
            Job(
                id=uuid.uuid4().hex,
                user_id=uid,
                name=f"job-{n}",
                source_id="src",
                storage_id="storage",
                schedule_json={"every": "1h"},
                timezone="UTC",
                caller_context_json={},
                next_run_at=now + timedelta(hours=1),
            )
            for n in range(counts["jobs"])
        ),
    )
    _bulk(
        UsageEvent,
        (
            UsageEvent(user_id=uid, metric="execute", duration_ms=n)
            for n in range(counts["usage_events"])
        ),
    )
    _bulk(
        AccessToken,
        (
            AccessToken(
                user=user, name=f"t{n}", token_prefix="kody_", token_hash=secrets.token_hex(32)
            )
            for n in range(counts["access_tokens"])
        ),
    )
    return sum(counts.values())


def _bulk(model: Any, rows: Any) -> None:
    chunk: list[Any] = []
    for item in rows:
        chunk.append(item)
        if len(chunk) == BATCH:
            model.objects.bulk_create(chunk)
            chunk = []
    if chunk:
        model.objects.bulk_create(chunk)


def seed_mailbox(user_id: str, messages: int) -> None:
    """``messages`` inbound messages with their raw MIME blobs.

    Seeding 10k messages through the inbound path would be four actor calls and a MIME parse
    each; instead the rows go straight into the Mailbox actor's own tables with ``bulk_create``
    inside the user's schema (what ``commit_inbound_graph`` writes, minus the ledger), after one
    real actor call has created the schema and recorded the owner identity.
    """
    from django.core.files.base import ContentFile
    from django.db import transaction
    from django.utils import timezone

    from apps.mailbox.actor import Mailbox
    from apps.mailbox.actor import models as m
    from kody import blobs
    from kody.userschema.naming import schema_name_for
    from kody.userschema.scope import user_schema_scope

    Mailbox.call(user_id, "count")
    now = timezone.now()
    threads = max(messages // 10, 1)
    storage = blobs.bucket("email_blobs")
    with transaction.atomic(), user_schema_scope(schema_name_for(user_id)):
        thread_ids = [uuid.uuid4().hex for _ in range(threads)]
        m.EmailThread.objects.bulk_create(
            [
                m.EmailThread(
                    id=tid,
                    inbox_id="inbox",
                    subject_normalized=f"thread {n}",
                    last_message_at=now,
                    created_at=now,
                    updated_at=now,
                )
                for n, tid in enumerate(thread_ids)
            ],
            batch_size=BATCH,
        )
        chunk: list[Any] = []
        for n in range(messages):
            mid = uuid.uuid4().hex
            key = blobs.email_raw_key(user_id, mid)
            raw = f"Subject: message {n}\r\n\r\nbody {n}\r\n".encode()
            storage.save(key, ContentFile(raw))
            chunk.append(
                m.EmailMessage(
                    id=mid,
                    direction="inbound",
                    inbox_id="inbox",
                    thread_id=thread_ids[n % threads],
                    from_address="someone@example.test",
                    subject=f"message {n}",
                    text_body=f"body {n}",
                    raw_mime_key=key,
                    raw_size=len(raw),
                    processing_status="stored",
                    received_at=now,
                    created_at=now,
                    updated_at=now,
                )
            )
            if len(chunk) == BATCH:
                m.EmailMessage.objects.bulk_create(chunk)
                chunk = []
        if chunk:
            m.EmailMessage.objects.bulk_create(chunk)


# --- the other user's meter calls -----------------------------------------------------------


def meter_loop(users: list[str], seconds: float, stop: Any, out: Any) -> None:
    """One closed-loop caller per user until ``stop`` is set or ``seconds`` pass."""
    from apps.entitlements.actor import UserMeter

    samples: list[list[float]] = [[] for _ in users]
    deadline = time.perf_counter() + seconds

    def run(index: int) -> None:
        user = users[index]
        while not stop.is_set() and (start := time.perf_counter()) < deadline:
            UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)
            samples[index].append(time.perf_counter() - start)

    workers = [threading.Thread(target=run, args=(i,)) for i in range(len(users))]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    out.put(samples)


class MeterSampler:
    """The meter callers in a forked process (web workers, not threads competing for our GIL)."""

    def __init__(self, users: list[str], seconds: float = 3600) -> None:
        from django.db import connections

        connections.close_all()
        context = multiprocessing.get_context("fork")
        self.stop = context.Event()
        self.out = context.Queue()
        self.proc = context.Process(target=meter_loop, args=(users, seconds, self.stop, self.out))
        self.started = time.perf_counter()
        self.proc.start()

    def finish(self) -> list[dict[str, float]]:
        self.stop.set()
        samples = self.out.get()
        elapsed = time.perf_counter() - self.started
        self.proc.join()
        return [{**summary(mine, elapsed), "calls": len(mine)} for mine in samples]


def baseline(users: list[str], seconds: float) -> list[dict[str, float]]:
    sampler = MeterSampler(users)
    time.sleep(seconds)
    return sampler.finish()


def other_users(victim: str) -> dict[str, str]:
    """Two other users: one whose meter shares the victim's shard, one on another shard."""
    from kody.actors.transport import shard_for

    found: dict[str, str] = {}
    while len(found) < 2:
        user = secrets.token_hex(32)
        kind = "same shard" if shard_for(user) == shard_for(victim) else "other shard"
        found.setdefault(kind, user)
    return {kind: found[kind] for kind in ("same shard", "other shard")}


# --- main -----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--baseline-seconds", type=float, default=10.0)
    options = parser.parse_args()
    setup_django()
    from django.conf import settings
    from django.test import override_settings

    from apps.accounts.deletion import job
    from apps.entitlements.actor import UserMeter
    from config.buckets import bucket_storages
    from kody import blobs
    from kody.userschema.schemas import ensure_schema

    scale = options.scale
    counts = {table: max(int(n * scale), 1) for table, n in PUBLIC_ROWS.items()}
    messages = max(int(MESSAGES * scale), 1)
    blob_dir = tempfile.TemporaryDirectory(prefix="kody-bench-deletion-")
    storages = bucket_storages(
        use_s3=False, endpoint_url="", bucket_prefix="", var_dir=Path(blob_dir.name)
    )

    def consume(user: str) -> None:
        UserMeter.call(user, "consume", resource="execute_calls_per_day", day=DAY, limit=LIMIT)

    with blob_dir, override_settings(STORAGES={**settings.STORAGES, **storages}):
        settings.KODY_ACTORS_INLINE = True
        victim = make_user("victim")
        others = other_users(victim.stable_user_id)
        for user in others.values():
            ensure_schema(user)
            consume(user)
        started = time.perf_counter()
        rows = seed_public_rows(victim, counts)
        seed_mailbox(victim.stable_user_id, messages)
        consume(victim.stable_user_id)
        seeded = time.perf_counter() - started
        prefix = blobs.email_raw_prefix(victim.stable_user_id)
        blob_count = sum(1 for _ in blobs.list_prefix("email_blobs", prefix))
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"Account deletion benchmark (scale {scale:g}: {rows:,} public rows, {messages:,}"
            f" messages, {blob_count:,} blobs; seeded in {seeded:.1f}s;"
            f" {settings.KODY_ACTOR_SHARDS} shards, {os.cpu_count()} CPUs, load average {load})\n"
        )

        settings.KODY_ACTORS_INLINE = False
        users = list(others.values())
        with shard_worker():
            for user in users:
                consume(user)
            before = baseline(users, options.baseline_seconds)
            sampler = MeterSampler(users)
            steps: list[tuple[str, float, Any]] = []
            last = [time.perf_counter()]

            def on_step(report: Any) -> None:
                now = time.perf_counter()
                steps.append((report.step, now - last[0], report))
                last[0] = now

            deletion_started = time.perf_counter()
            deletion = job.run(job.start(victim, requested_by="operator"), on_step=on_step)
            wall = time.perf_counter() - deletion_started
            during = sampler.finish()
            after = baseline(users, options.baseline_seconds)

        for index, kind in enumerate(others):
            for label, stats in (("before", before), ("during deletion", during), ("after", after)):
                print(row(f"meter consume, {kind}, {label}", stats[index]))
        print(f"\nDeletion: {deletion.status} in {wall:.2f}s")
        for name, seconds, report in steps:
            deleted = sum(report.deleted.values())
            updated = sum(report.updated.values())
            print(f"  {name:12} {seconds:8.2f}s  deleted {deleted:>9,}  updated {updated:>6,}")
        left = sum(1 for _ in blobs.list_prefix("email_blobs", prefix))
        print(f"  blobs left under the user's prefix: {left}")

    print("\nRatios (same run; without = the worse of before and after)")
    for index, kind in enumerate(others):
        base_p99 = max(before[index]["p99_ms"], after[index]["p99_ms"])
        base_p50 = max(before[index]["p50_ms"], after[index]["p50_ms"])
        print(
            f"  {kind:11} meter p99 during / without  {during[index]['p99_ms'] / base_p99:6.2f}x"
            f"   (target <= 1.5x); p50 {during[index]['p50_ms'] / base_p50:.2f}x"
        )
    print(f"  load average at the end: {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
