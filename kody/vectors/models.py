from __future__ import annotations

from django.db import models
from pgvector.django import HnswIndex, VectorField

# The configured embedder's dimension (kody.embeddings; WordLlama's 256 by default). A model
# with another dimension needs a migration altering this column and a full reindex: vectors
# are derived data, rebuilt from their source rows (docs/runbooks/reindex.md).
EMBEDDING_DIMENSIONS = 256


class VectorEntry(models.Model):
    """One vector. ``namespace`` is the owner's stable id (or the builtin namespace), and
    ``owner_user_id`` repeats it so every user query can filter on both."""

    pk = models.CompositePrimaryKey("namespace", "vector_id")
    namespace = models.CharField(max_length=64)
    vector_id = models.CharField(max_length=255)
    owner_user_id = models.CharField(max_length=64)
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS)
    # kody.embeddings.model_tag() of the model that produced the vector; search reads only the
    # current model's rows, so a model change never mixes two embedding spaces.
    model = models.CharField(max_length=128, default="")
    metadata = models.JSONField(default=dict, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "kody_vectors"
        indexes = [
            HnswIndex(
                fields=["embedding"],
                name="kody_vectors_embedding_hnsw",
                opclasses=["vector_cosine_ops"],
                m=16,
                ef_construction=64,
            ),
            models.Index(fields=["owner_user_id", "namespace"], name="kody_vectors_owner_ix"),
        ]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.vector_id}"
