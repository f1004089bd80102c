"""``manage.py check`` refuses an embedder whose dimension differs from the vector column."""

from __future__ import annotations

from typing import Any

from django.core import checks


@checks.register()
def embedder_matches_vector_column(**kwargs: Any) -> list[checks.CheckMessage]:
    from kody.embeddings import get_embedder
    from kody.vectors.models import EMBEDDING_DIMENSIONS

    dims = get_embedder().dimensions
    if dims == EMBEDDING_DIMENSIONS:
        return []
    return [
        checks.Error(
            f"the embedder makes {dims}-dimension vectors but kody_vectors holds "
            f"{EMBEDDING_DIMENSIONS}",
            hint="alter kody.vectors.models.EMBEDDING_DIMENSIONS with a migration, then run "
            "manage.py reindex --force (docs/runbooks/reindex.md)",
            id="kody.E101",
        )
    ]
