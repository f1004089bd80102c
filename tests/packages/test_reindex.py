"""``manage.py reindex``: rebuilds, skips what is unchanged, cleans orphans, survives SIGKILL."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote

import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection

from apps.packages.models import McpMemory, VectorEmbedFingerprint
from apps.packages.services.reindex import cursor_key
from kody.kv import store
from kody.vectors.index import BUILTIN_NAMESPACE
from kody.vectors.models import VectorEntry
from tests.packages.factories import McpMemoryFactory

ROOT = Path(__file__).resolve().parents[2]
SUMMARY = re.compile(
    r"^reindex scanned=(\d+) embedded=(\d+) skipped=(\d+) deleted_orphans=(\d+) "
    r"seconds=\d+\.\d$"
)


def run(*args: str) -> tuple[int, int, int, int]:
    out = io.StringIO()
    call_command("reindex", *args, stdout=out, stderr=io.StringIO())
    lines = out.getvalue().strip().splitlines()
    assert len(lines) == 1, lines
    match = SUMMARY.match(lines[0])
    assert match, lines[0]
    return tuple(int(g) for g in match.groups())  # type: ignore[return-value]


def memories_for(user, count: int) -> list[McpMemory]:
    return [
        McpMemoryFactory(user_id=user.stable_user_id, subject=f"fact {i}", summary=f"detail {i}")
        for i in range(count)
    ]


@pytest.mark.django_db(databases=["default", "audit"])
def test_reindex_embeds_once_then_skips_and_force_rewrites(owner, outsider):
    memories_for(owner, 7)
    memories_for(outsider, 3)
    assert run("--kind", "memory", "--batch-size", "4") == (10, 10, 0, 0)
    assert VectorEntry.objects.filter(namespace=owner.stable_user_id).count() == 7
    assert VectorEntry.objects.filter(namespace=outsider.stable_user_id).count() == 3
    assert run("--kind", "memory") == (10, 0, 10, 0)
    assert run("--kind", "memory", "--force") == (10, 10, 0, 0)
    assert run("--kind", "memory", "--user", outsider.email) == (3, 0, 3, 0)


@pytest.mark.django_db(databases=["default", "audit"])
def test_reindex_rebuilds_builtin_capabilities(owner):
    scanned, embedded, skipped, _ = run("--kind", "capability")
    assert scanned == embedded > 10 and skipped == 0
    assert VectorEntry.objects.filter(namespace=BUILTIN_NAMESPACE, vector_id="search").exists()
    assert run("--kind", "capability")[1] == 0


@pytest.mark.django_db(databases=["default", "audit"])
def test_reindex_deletes_orphans_and_vectors_of_deleted_memories(owner):
    kept, gone = memories_for(owner, 2)
    run("--kind", "memory")
    McpMemory.objects.filter(pk=gone.pk).update(status="deleted")
    assert run("--kind", "memory") == (2, 0, 1, 1)
    McpMemory.objects.filter(pk=kept.pk).delete()  # a raw delete the service never saw
    assert run("--kind", "memory") == (1, 0, 0, 1)
    assert not VectorEntry.objects.filter(namespace=owner.stable_user_id).exists()
    assert not VectorEmbedFingerprint.objects.filter(user_id=owner.stable_user_id).exists()


@pytest.mark.django_db(databases=["default", "audit"])
def test_unknown_user_is_a_command_error(owner):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError):
        call_command("reindex", "--user", "nobody@example.com", stdout=io.StringIO())


def _database_url() -> str:
    db = settings.DATABASES["default"]
    host = quote(str(db["HOST"]), safe="")
    port = f":{db['PORT']}" if db.get("PORT") else ""
    name = connection.settings_dict["NAME"]
    return f"postgres://{db['USER']}:{quote(db['PASSWORD'] or '')}@{host}{port}/{name}"


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_a_killed_reindex_resumes_and_a_second_run_embeds_nothing(owner):
    memories_for(owner, 60)
    env = {**os.environ, "DATABASE_URL": _database_url(), "REDIS_URL": settings.REDIS_URL}
    argv = [sys.executable, "manage.py", "reindex", "--kind", "memory", "--batch-size", "10"]
    child = subprocess.Popen(
        [*argv, "--throttle", "0.5"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    key = cursor_key("memory", None)
    deadline = time.monotonic() + 60
    while store.get_json(key) is None:
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the reindex never saved a cursor"
        time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    done_before = VectorEntry.objects.filter(namespace=owner.stable_user_id).count()
    assert 10 <= done_before < 60
    assert store.get_json(key) is not None

    # The cursor commits with its batch's vectors, so the resumed run starts exactly after it.
    left = 60 - done_before
    assert run("--kind", "memory", "--batch-size", "10", "--resume") == (left, left, 0, 0)
    assert VectorEntry.objects.filter(namespace=owner.stable_user_id).count() == 60
    assert store.get_json(key) is None

    assert run("--kind", "memory") == (60, 0, 60, 0)
