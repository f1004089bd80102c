"""Search-index debt: a write commits even when its vector cannot be written now, and becomes
searchable once the debt is drained (by the task, the lane or ``manage.py reindex``)."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from apps.packages.models import McpMemory, SearchIndexDebt
from apps.packages.services import index_debt, memories, search_index
from apps.packages.services.vector_kinds import KINDS, nearest_owned
from apps.packages.tasks import drain_search_index_debt
from kody.embeddings import embed, get_embedder
from kody.lanes import run_lane
from kody.vectors.models import VectorEntry
from tests.packages.factories import McpMemoryFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

TEA = {"subject": "Prefers green tea", "summary": "Drinks green tea every morning."}


class BrokenEmbedder:
    model, dimensions, version = "wordllama-l2-supercat", 256, "0.4.0.post1"

    def embed(self, texts):  # type: ignore[no-untyped-def]
        raise RuntimeError(f"model crashed on {texts!r}")


@pytest.fixture
def deferred(settings):
    settings.KODY_EMBED_MODE = "deferred"


@pytest.fixture
def broken(monkeypatch):
    monkeypatch.setattr(search_index, "get_embedder", BrokenEmbedder)


@pytest.fixture(autouse=True)
def fresh_speed():
    search_index.speed.reset()
    yield
    search_index.speed.reset()


def semantic_ids(user) -> set[str]:
    """Memories the vector search alone finds (``memorySearch`` also matches keywords)."""
    [vector] = embed(["what does the user drink for breakfast"])
    hits = nearest_owned(KINDS["memory"], user.stable_user_id, vector, limit=5, min_score=0.0)
    return {row.id for row, _ in hits}


def vectors_of(user) -> int:
    return VectorEntry.objects.filter(namespace=user.stable_user_id).count()


def test_deferred_write_commits_then_the_task_makes_it_searchable(
    deferred, as_owner, owner, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as kicks:
        memory = as_owner.call("memoryUpsert", **TEA)["memory"]
    # The drain is kicked after COMMIT (beside the kernel's own schema-cache callbacks of the
    # write lease's actor calls).
    assert len([k for k in kicks if k.__module__.startswith("apps.")]) == 1
    assert McpMemory.objects.filter(id=memory["id"]).exists()
    assert vectors_of(owner) == 0
    [debt] = SearchIndexDebt.objects.all()
    assert (debt.kind, debt.user_id, debt.source_id) == (
        "memory",
        owner.stable_user_id,
        memory["id"],
    )
    assert memory["id"] not in semantic_ids(owner)

    assert drain_search_index_debt(user_id=owner.stable_user_id) == 1
    assert not SearchIndexDebt.objects.exists() and vectors_of(owner) == 1
    assert memory["id"] in semantic_ids(owner)
    assert drain_search_index_debt(user_id=owner.stable_user_id) == 0  # a repeat is harmless


def test_a_failed_embed_keeps_the_write_and_leaves_debt_that_is_retried(
    broken, as_owner, owner, monkeypatch, caplog
):
    memory = as_owner.call("memoryUpsert", **TEA)["memory"]  # inline mode, the model fails
    assert McpMemory.objects.get(id=memory["id"]).subject == TEA["subject"]
    [debt] = SearchIndexDebt.objects.all()
    assert debt.attempts == 1 and debt.last_error == "RuntimeError"
    assert debt.available_at > timezone.now()  # backed off
    assert "green tea" not in caplog.text  # logs name the error class, never the text

    assert index_debt.drain().handled == 0  # not due yet
    SearchIndexDebt.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    report = index_debt.drain()
    assert (report.indexed, report.failed) == (0, 1)
    debt.refresh_from_db()
    assert debt.attempts == 2 and debt.available_at - timezone.now() > timedelta(seconds=45)

    monkeypatch.setattr(search_index, "get_embedder", get_embedder)  # the model recovers
    SearchIndexDebt.objects.update(available_at=timezone.now() - timedelta(seconds=1))
    run_lane("search_index_debt")
    assert not SearchIndexDebt.objects.exists() and vectors_of(owner) == 1
    assert memory["id"] in semantic_ids(owner)


def test_reindex_settles_debt_even_before_it_is_due(broken, owner, monkeypatch):
    memories.upsert(owner.stable_user_id, **TEA)
    assert SearchIndexDebt.objects.get().available_at > timezone.now()
    monkeypatch.setattr(search_index, "get_embedder", get_embedder)
    call_command("reindex", "--kind", "memory", stdout=io.StringIO(), stderr=io.StringIO())
    assert not SearchIndexDebt.objects.exists() and vectors_of(owner) == 1


def test_debt_for_a_deleted_row_removes_its_vector(owner, settings):
    memory = memories.upsert(owner.stable_user_id, **TEA)
    assert vectors_of(owner) == 1
    settings.KODY_EMBED_MODE = "deferred"
    memories.delete(owner.stable_user_id, memory.id)
    assert vectors_of(owner) == 1 and SearchIndexDebt.objects.count() == 1
    index_debt.drain()
    assert vectors_of(owner) == 0 and not SearchIndexDebt.objects.exists()


def test_a_crafted_debt_row_cannot_index_another_users_memory(owner, outsider, deferred):
    theirs = McpMemoryFactory(user_id=owner.stable_user_id, subject="owner only")
    index_debt.record("memory", outsider.stable_user_id, [theirs.id])
    report = index_debt.drain()
    assert report.indexed == 1 and report.embedded == 0
    assert vectors_of(outsider) == 0 and vectors_of(owner) == 0


def test_drain_for_one_user_leaves_the_others_debt(owner, outsider, deferred):
    memories.upsert(owner.stable_user_id, **TEA)
    memories.upsert(outsider.stable_user_id, subject="Cats", summary="Has two cats.")
    drain_search_index_debt(user_id=owner.stable_user_id)
    assert vectors_of(owner) == 1 and vectors_of(outsider) == 0
    assert SearchIndexDebt.objects.get().user_id == outsider.stable_user_id


def test_auto_mode_defers_once_the_measured_embedder_is_slow(settings):
    settings.KODY_EMBED_MODE, settings.KODY_EMBED_INLINE_BUDGET_MS = "auto", 25.0
    speed = search_index.speed
    speed.record(1, 2.0)  # the first call loads the model: not counted
    assert not index_debt.deferred()
    speed.record(1, 0.001)
    assert not index_debt.deferred()
    speed.record(500, 60.0)  # a reindex batch is not a write's latency
    assert not index_debt.deferred()
    for _ in range(10):
        speed.record(1, 0.2)
    assert index_debt.deferred()
    settings.KODY_EMBED_MODE = "inline"
    assert not index_debt.deferred()


def test_nothing_is_indexed_for_an_account_being_deleted(owner, outsider, deferred):
    memories.upsert(owner.stable_user_id, **TEA)
    memories.upsert(outsider.stable_user_id, subject="Cats", summary="Has two cats.")
    type(owner).objects.filter(pk=owner.pk).update(deleting_at=timezone.now())
    index_debt.drain()
    assert vectors_of(owner) == 0 and vectors_of(outsider) == 1
    assert SearchIndexDebt.objects.get().user_id == owner.stable_user_id  # kept, untouched
    call_command("reindex", "--kind", "memory", stdout=io.StringIO(), stderr=io.StringIO())
    assert vectors_of(owner) == 0
