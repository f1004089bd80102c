from __future__ import annotations

from django.db import models
from django.db.models import Q


class KvEntry(models.Model):
    """Durable key-value rows (the original's KV snapshots), keys in their original formats."""

    # Collation "C" lets the primary key index serve prefix scans (LIKE 'prefix%').
    key = models.CharField(max_length=1024, primary_key=True, db_collation="C")
    value = models.BinaryField()
    expires_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "kody_kv"
        indexes = [
            models.Index(
                fields=["expires_at"],
                condition=Q(expires_at__isnull=False),
                name="kody_kv_expires_ix",
            )
        ]

    def __str__(self) -> str:
        return self.key
