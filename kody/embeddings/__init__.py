"""Text embeddings behind one small interface.

The configured embedder (``settings.KODY_EMBEDDER``, an import path) turns texts into unit
vectors. Its ``model``, ``dimensions`` and ``version`` are part of every vector fingerprint and
of every stored vector row, so changing model is a reindex, never a silent mix: vectors of
another model stay invisible to search until ``manage.py reindex`` rewrites them.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Protocol

from django.conf import settings
from django.utils.module_loading import import_string


class Embedder(Protocol):
    model: str
    dimensions: int
    version: str

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


@cache
def get_embedder() -> Embedder:
    return import_string(settings.KODY_EMBEDDER)()


def embed(texts: Sequence[str]) -> list[list[float]]:
    return get_embedder().embed(texts)


def model_tag(embedder: Embedder | None = None) -> str:
    """What a vector row records about the model that produced it."""
    e = embedder or get_embedder()
    return f"{e.model}@{e.version}/{e.dimensions}"
