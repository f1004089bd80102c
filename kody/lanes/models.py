from __future__ import annotations

from django.db import models


class LaneCursor(models.Model):
    """Where a lane's keyset scan stopped, so the next run continues from there."""

    lane = models.CharField(max_length=100, primary_key=True)
    position = models.TextField(blank=True, default="")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "kody_lane_cursors"

    def __str__(self) -> str:
        return f"{self.lane}@{self.position}"
