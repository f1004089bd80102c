"""factory_boy factories for the kernel's shared tables: lane bookkeeping (cursor, last run,
operator control) and vectors. Per-user schema rows are made through actor calls, never here."""

from __future__ import annotations

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from kody.lanes.models import LaneControl, LaneCursor, LaneRunRecord
from kody.vectors.models import EMBEDDING_DIMENSIONS, VectorEntry
from tests.rows import ALICE


class LaneCursorFactory(DjangoModelFactory):
    class Meta:
        model = LaneCursor

    lane = "test_lane"


class LaneRunRecordFactory(DjangoModelFactory):
    """When a lane last started (now, unless ``last_started_at=`` says otherwise)."""

    class Meta:
        model = LaneRunRecord

    lane = "test_lane"
    last_started_at = factory.LazyFunction(timezone.now)


class LaneControlFactory(DjangoModelFactory):
    """The operator-facing row of a lane, enabled."""

    class Meta:
        model = LaneControl

    name = "test_lane"


class VectorEntryFactory(DjangoModelFactory):
    """A vector in ALICE's namespace; ``namespace=`` and ``owner_user_id=`` move it."""

    class Meta:
        model = VectorEntry

    namespace = ALICE
    owner_user_id = factory.SelfAttribute("namespace")
    vector_id = factory.Sequence(lambda n: f"memory_{n}")
    embedding = factory.LazyFunction(lambda: [0.1] * EMBEDDING_DIMENSIONS)
