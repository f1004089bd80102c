"""The kernel's public tables (Django finds app models here)."""

from kody.actors.fence import ShardEpoch
from kody.kv.models import KvEntry
from kody.lanes.models import LaneCursor, LaneRunRecord
from kody.outbox.models import OutboxMessage
from kody.userschema.models import SchemaArchive, UserSchema
from kody.vectors.models import VectorEntry

__all__ = [
    "KvEntry",
    "LaneCursor",
    "LaneRunRecord",
    "OutboxMessage",
    "SchemaArchive",
    "ShardEpoch",
    "UserSchema",
    "VectorEntry",
]
