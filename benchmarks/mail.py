"""Inbound mail through the real queue against the same writes without the actor layer.

    REDIS_URL=redis://127.0.0.1:6379/3 python benchmarks/mail.py [--messages 1000] [--users 50]

1,000 messages whose wire sizes are log-uniform on [4 KiB, 700 KiB] (fixed seed; each
message is built to land on its drawn size) for 50 users on the max plan (768 KiB persist
cap, so nothing is reduced), delivered by 8 caller threads, each keeping one database
connection for the run (as a web worker with ``CONN_MAX_AGE`` does):

* ``actor pipeline``: ``apps.mailbox.services.inbound.deliver`` with a real Celery shard
  worker: one call for the dedupe claim + idempotent meter charge + storing lease, the raw
  MIME blob, one call for the graph commit and the finalize (one transaction).
* ``direct writes``: the same parse and the same blob write, then the same rows (ledger
  event, thread, message, attachments, daily counter) in one transaction per message under
  ``SET LOCAL search_path`` — no queue, no ledger steps, no owner checks, and none of the
  public reads the inbound service makes first (recipient, inbox, sender rules).

Prints messages/s and p50/p99 per message for both and the ratio (target: the actor pipeline
at least 50 % of the direct writes' messages/s); the CPU milliseconds one message costs in
each process taking part (the callers, i.e. this process, the shard worker, Postgres with
its backends, Redis), read from /proc and Redis INFO around each phase; then the SQL
statements one warm message costs on each path (counted inline with
``CaptureQueriesContext``; the test ``tests/mailbox/test_inbound_statements.py`` bounds the
actor path's count). Timings are printed, never asserted.
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


_TICK = os.sysconf("SC_CLK_TCK")


def _proc_cpu(pid: int, children: bool = False) -> float:
    """CPU seconds (user + system) of one process from /proc, with its reaped children's."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    if children:
        ticks += int(fields[13]) + int(fields[14])  # cutime, cstime
    return ticks / _TICK


def _postgres_cpu() -> float | None:
    """The embedded server's CPU: the postmaster with every backend it reaped, plus the live
    ones. ``None`` when the server is not a local process this user can read."""
    from django.db import connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_setting('data_directory')")
            data_dir = Path(cursor.fetchone()[0])
        postmaster = int((data_dir / "postmaster.pid").read_text().split()[0])
    except Exception:
        return None
    total = _proc_cpu(postmaster, children=True)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == postmaster:
            total += (int(fields[11]) + int(fields[12])) / _TICK
    return total


def _redis_cpu() -> float | None:
    from kody.actors import transport

    try:
        info = transport.client().info("cpu")
    except Exception:
        return None
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def cpu_snapshot(worker_pids: list[int]) -> dict[str, float | None]:
    """CPU seconds so far of each process taking part: the callers (this process), the shard
    workers, Postgres and Redis."""
    times = os.times()
    return {
        "callers": times.user + times.system,
        "shard worker": sum(_proc_cpu(pid, children=True) for pid in worker_pids),
        "postgres": _postgres_cpu(),
        "redis": _redis_cpu(),
    }


def cpu_row(label: str, before: dict, after: dict, messages: int) -> str:
    """CPU milliseconds per message, by process."""
    parts = []
    total = 0.0
    for name, start in before.items():
        end = after[name]
        if start is None or end is None:
            continue
        ms = (end - start) * 1000 / messages
        if name == "shard worker" and ms == 0:
            continue
        total += ms
        parts.append(f"{name} {ms:5.1f}")
    return f"{label:46} CPU ms/message: " + ", ".join(parts) + f"; total {total:5.1f}"


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


def _message(n: int, seed: int, payload: bytes) -> bytes:
    msg = EmailMessage()
    msg["From"] = f"sender{n}@example.org"
    msg["To"] = "placeholder@mail.localhost"
    msg["Subject"] = f"Benchmark message {n}"
    msg["Message-ID"] = f"<bench-{n}-{seed}@example.org>"
    msg.set_content("Hello,\n" + "lorem ipsum dolor sit amet\n" * 40)
    if payload:
        msg.add_attachment(payload, maintype="application", subtype="octet-stream",
                           filename=f"f{n}.bin")  # fmt: skip
    return msg.as_bytes()


def corpus(count: int, seed: int = 7) -> list[bytes]:
    """``count`` messages whose wire sizes are log-uniform on [4 KiB, 700 KiB]: a text part
    and one base64 attachment, sized so the whole message lands on its drawn size (within a
    few bytes; a first build measures the fixed overhead and base64's growth)."""
    rng = random.Random(seed)
    out = []
    for n in range(count):
        size = int(math.exp(rng.uniform(math.log(4 * KIB), math.log(700 * KIB))))
        data = rng.randbytes(size)  # trimmed below: the first bytes are the attachment
        fixed = len(_message(n, seed, b""))
        # base64 is 4 bytes per 3 plus a line break per 76 characters; the attachment's own
        # headers are measured with a one-byte attachment.
        headers = len(_message(n, seed, b"x")) - fixed - 5
        payload = max(1, int((size - fixed - headers) * 3 / 4 * 76 / 77))
        raw = _message(n, seed, data[:payload])
        while len(raw) < size and payload < len(data):  # base64 rounds in 3-byte steps
            payload += 3
            raw = _message(n, seed, data[:payload])
        out.append(raw)
    return out


def fixed_work(fn: Callable[[int], object], total: int, threads: int) -> dict[str, float]:
    """``threads`` callers share ``total`` items; per-item latency and overall rate."""
    lock = threading.Lock()
    state = {"next": 0}
    samples: list[float] = []

    def run() -> None:
        from django.db import connections

        try:
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
        finally:
            # Each caller thread keeps its connection for the whole run, as a web worker with
            # CONN_MAX_AGE does (the embedded settings' 0 would reconnect per message).
            connections.close_all()

    workers = [threading.Thread(target=run) for _ in range(threads)]
    started = time.perf_counter()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return summary(samples, time.perf_counter() - started)


def actor_fn(users: list, raws: list[bytes], run: str) -> Callable[[int], object]:
    from apps.mailbox.services import inbound

    def deliver(index: int) -> object:
        user = users[index % len(users)]
        result = inbound.deliver(raws[index], f"{user.username}@mail.localhost",
                                 f"{run}-{index}")  # fmt: skip
        assert result.status == "received", result
        return result

    return deliver


def direct_fn(users: list, raws: list[bytes], run: str) -> Callable[[int], object]:
    from django.db import transaction
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
        return message_id

    return write


def statements_per_message(users: list, raws: list[bytes], run: str) -> tuple[str, str]:
    """SQL round trips and statements (a multi-statement query counts once in the first,
    each of its statements in the second) for one warm message on each path, counted in this
    process (inline)."""
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

    def counted(captured: CaptureQueriesContext) -> str:
        statements = sum(len(q["sql"].split(";\n")) for q in captured.captured_queries)
        return f"{len(captured.captured_queries)} round trips ({statements} statements)"

    return counted(actor), counted(direct)


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
    with shard_worker() as procs:
        settings.KODY_ACTORS_INLINE = False
        for user in users:  # create each schema and mailbox once (the cold path)
            Mailbox.call(user.stable_user_id, "count")
        pids = [proc.pid for proc in procs]
        actor_cpu = [cpu_snapshot(pids)]
        actor = fixed_work(actor_fn(users, raws, run), len(raws), args.threads)
        actor_cpu.append(cpu_snapshot(pids))
    write = direct_fn(users, raws, run)
    direct_cpu = [cpu_snapshot([])]
    direct = fixed_work(write, len(raws), args.threads)
    direct_cpu.append(cpu_snapshot([]))
    print(row("actor pipeline (queue: 2 calls)", actor))
    print(row("direct writes (no actor layer)", direct))
    print(cpu_row("actor pipeline", *actor_cpu, len(raws)))
    print(cpu_row("direct writes", *direct_cpu, len(raws)))
    ratio = actor["per_s"] / direct["per_s"]
    print(f"actor pipeline / direct writes: {ratio:.0%} of messages/s (target >= 50%)")
    actor_sql, direct_sql = statements_per_message(users, raws, run)
    print(f"SQL per warm message: actor pipeline {actor_sql}, direct {direct_sql}")
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
