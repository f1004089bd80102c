"""Inbound mail through the real queue against the same writes without the actor layer.

    REDIS_URL=redis://127.0.0.1:6379/3 python benchmarks/mail.py [--messages 1000] [--users 50]

1,000 messages from 4 KiB to 700 KiB (log-uniform, fixed seed) for 50 users on the max plan
(768 KiB persist cap, so nothing is reduced), delivered by 8 caller threads:

* ``actor pipeline``: ``apps.mailbox.services.inbound.deliver`` with a real Celery shard
  worker: one call for the dedupe claim + idempotent meter charge + storing lease, the raw
  MIME blob, one call for the graph commit and the finalize (one transaction).
* ``direct writes``: the same parse and the same blob write, then the same rows (ledger
  event, thread, message, attachments, daily counter) in one transaction per message under
  ``SET LOCAL search_path`` — no queue, no ledger steps, no owner checks.

Prints messages/s and p50/p99 per message for both and the ratio (target: the actor pipeline
at least 50 % of the direct writes' messages/s), then the SQL statements one warm message
costs on each path (counted inline with ``CaptureQueriesContext``; the test
``tests/mailbox/test_inbound_statements.py`` bounds the actor path's count). Timings are
printed, never asserted.
Runs on its own database (``test_kody_bench_mail``) with fresh users each time.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import secrets
import sys
import threading
import time
import uuid
from collections.abc import Callable
from email.message import EmailMessage
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("KODY_TEST_DB_SUFFIX", "_bench_mail")

from _harness import row, setup_django, shard_worker, summary  # noqa: E402

KIB = 1024


def make_users(count: int) -> list[object]:
    from apps.accounts.models import User

    users = []
    for _ in range(count):
        tag = secrets.token_hex(6)
        users.append(
            User.objects.create_user(
                username=f"bm-{tag}", email=f"bm-{tag}@example.test", password=None, plan="max"
            )
        )
    return users


def corpus(count: int, seed: int = 7) -> list[bytes]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        size = int(math.exp(rng.uniform(math.log(4 * KIB), math.log(700 * KIB))))
        msg = EmailMessage()
        msg["From"] = f"sender{n}@example.org"
        msg["To"] = "placeholder@mail.localhost"
        msg["Subject"] = f"Benchmark message {n}"
        msg["Message-ID"] = f"<bench-{n}-{seed}@example.org>"
        msg.set_content("Hello,\n" + "lorem ipsum dolor sit amet\n" * 40)
        # base64 grows 4/3: size the attachment so the whole message lands near ``size``.
        payload = max(0, int((size - 2 * KIB) * 3 / 4))
        if payload:
            msg.add_attachment(rng.randbytes(payload), maintype="application",
                               subtype="octet-stream", filename=f"f{n}.bin")  # fmt: skip
        out.append(msg.as_bytes())
    return out


def fixed_work(fn: Callable[[int], object], total: int, threads: int) -> dict[str, float]:
    """``threads`` callers share ``total`` items; per-item latency and overall rate."""
    lock = threading.Lock()
    state = {"next": 0}
    samples: list[float] = []

    def run() -> None:
        while True:
            with lock:
                index = state["next"]
                state["next"] += 1
            if index >= total:
                return
            start = time.perf_counter()
            fn(index)
            elapsed = time.perf_counter() - start
            with lock:
                samples.append(elapsed)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return summary(samples, time.perf_counter() - started)


def actor_fn(users: list, raws: list[bytes], run: str) -> Callable[[int], object]:
    from django.db import connection

    from apps.mailbox.services import inbound

    def deliver(index: int) -> object:
        user = users[index % len(users)]
        try:
            result = inbound.deliver(raws[index], f"{user.username}@mail.localhost",
                                     f"{run}-{index}")  # fmt: skip
        finally:
            connection.close()  # threads: do not leak a connection per thread
        assert result.status == "received", result
        return result

    return deliver


def direct_fn(users: list, raws: list[bytes], run: str) -> Callable[[int], object]:
    from django.db import connection, transaction
    from django.utils import timezone

    from apps.entitlements.actor import models as meter
    from apps.mailbox.actor import models as mm
    from apps.mailbox.actor.mailbox import normalize_subject
    from apps.mailbox.services import blobstore, inboxes, mime
    from kody.blobs.keys import email_raw_key
    from kody.userschema.naming import schema_name_for
    from kody.userschema.scope import user_schema_scope

    inbox_ids = {u.stable_user_id: inboxes.ensure_inbox(u).id for u in users}

    def write(index: int) -> object:
        user = users[index % len(users)]
        uid = user.stable_user_id
        raw = raws[index]
        parsed = mime.parse(raw)
        message_id = uuid.uuid4().hex
        key = email_raw_key(uid, message_id)
        blobstore.put(key, raw)
        now = timezone.now()
        try:
            with transaction.atomic(), user_schema_scope(schema_name_for(uid)):
                counter, _ = meter.DailyCounter.objects.get_or_create(
                    resource="email_receives_per_day", day=now.date()
                )
                meter.DailyCounter.objects.filter(
                    resource="email_receives_per_day", day=now.date()
                ).update(count=counter.count + 1)
                thread = mm.EmailThread.objects.create(
                    id=uuid.uuid4().hex, inbox_id=inbox_ids[uid],
                    subject_normalized=normalize_subject(parsed.message["subject"]),
                    last_message_at=now, created_at=now, updated_at=now,
                )  # fmt: skip
                mm.EmailMessage.objects.create(
                    id=message_id, direction="inbound", inbox_id=inbox_ids[uid],
                    thread_id=thread.id, processing_status="stored", raw_mime_key=key,
                    received_at=now, created_at=now, updated_at=now, **parsed.message,
                )  # fmt: skip
                mm.EmailAttachment.objects.bulk_create(
                    [mm.EmailAttachment(id=f"{message_id}-{n}", message_id=message_id,
                                        created_at=now, **att)
                     for n, att in enumerate(parsed.attachments)]
                )  # fmt: skip
                mm.EmailDeliveryEvent.objects.create(
                    id=uuid.uuid4().hex, message_id=message_id, inbox_id=inbox_ids[uid],
                    event_type="received", provider="bench-direct",
                    provider_event_id=f"{run}-{index}", state="received",
                    created_at=now, updated_at=now,
                )  # fmt: skip
        finally:
            connection.close()
        return message_id

    return write


def statements_per_message(users: list, raws: list[bytes], run: str) -> tuple[int, int]:
    """SQL statements for one warm message on each path, counted in this process (inline)."""
    from django.conf import settings
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.KODY_ACTORS_INLINE = True
    small = min(range(len(raws)), key=lambda i: len(raws[i]))
    one = [users[0]]
    deliver = actor_fn(one, [raws[small]], f"{run}-count")
    write = direct_fn(one, [raws[small]], f"{run}-count")
    with CaptureQueriesContext(connection) as actor:
        deliver(0)
    with CaptureQueriesContext(connection) as direct:
        write(0)
    return len(actor.captured_queries), len(direct.captured_queries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=1000)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    setup_django()
    from django.conf import settings

    from apps.mailbox.actor import Mailbox

    print(f"load average at start: {os.getloadavg()}")
    users = make_users(args.users)
    raws = corpus(args.messages)
    sizes = sorted(len(r) for r in raws)
    print(f"{len(raws)} messages, {sizes[0] // KIB}–{sizes[-1] // KIB} KiB, "
          f"median {sizes[len(sizes) // 2] // KIB} KiB, {args.users} users, "
          f"{args.threads} callers")  # fmt: skip
    run = secrets.token_hex(4)
    with shard_worker():
        settings.KODY_ACTORS_INLINE = False
        for user in users:  # create each schema and mailbox once (the cold path)
            Mailbox.call(user.stable_user_id, "count")
        actor = fixed_work(actor_fn(users, raws, run), len(raws), args.threads)
    direct = fixed_work(direct_fn(users, raws, run), len(raws), args.threads)
    print(row("actor pipeline (queue: 2 calls)", actor))
    print(row("direct writes (no actor layer)", direct))
    ratio = actor["per_s"] / direct["per_s"]
    print(f"actor pipeline / direct writes: {ratio:.0%} of messages/s (target >= 50%)")
    actor_sql, direct_sql = statements_per_message(users, raws, run)
    print(f"SQL statements per warm message: actor pipeline {actor_sql}, direct {direct_sql}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
