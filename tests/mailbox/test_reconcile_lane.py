"""The reconcile_inbound_deliveries lane: due owners in order, stuck deliveries settled,
failures backed off, each owner's visit confined to that owner's Mailbox."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from apps.mailbox.actor import Mailbox
from apps.mailbox.models import EmailInboundDueOwner
from apps.mailbox.services import inbound, reconcile
from kody.lanes import Cadence, all_lanes
from kody.userschema.naming import schema_name_for
from tests.mailbox.conftest import address, raw_blobs, receives_today, simple_mail
from tests.mailbox.factories import EmailInboundDueOwnerFactory

pytestmark = pytest.mark.django_db


class Killed(BaseException):
    """The worker dies between the blob write and the graph commit."""


def abandon(user, delivery_id: str, monkeypatch) -> None:
    """A delivery charged, its blob written, its commit never made; its lease now stale."""
    real = inbound._mailbox

    def dies_at_commit(uid: str, name: str, **kwargs: Any) -> Any:
        if name == "commit_inbound_graph":
            raise Killed()
        return real(uid, name, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(inbound, "_mailbox", dies_at_commit)
        with pytest.raises(Killed):
            inbound.deliver(simple_mail(), address(user), delivery_id)
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(user.stable_user_id)}".email_delivery_events'
            " SET reconcile_after = %s WHERE provider_event_id = %s",
            [timezone.now() - timedelta(minutes=1), delivery_id],
        )
    EmailInboundDueOwner.objects.filter(user_id=user.stable_user_id).update(
        due_at=timezone.now() - timedelta(minutes=1)
    )


def ledger(user) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT state FROM "{schema_name_for(user.stable_user_id)}".email_delivery_events'
            " ORDER BY created_at"
        )
        return [row[0] for row in cursor.fetchall()]


def test_the_lane_is_registered_every_tick_25_owners_a_batch():
    [found] = [x for x in all_lanes() if x.name == "reconcile_inbound_deliveries"]
    assert (found.cadence, found.batch_size) == (Cadence.EVERY_TICK, 25)


def test_a_stuck_delivery_is_settled_and_its_owner_hint_dropped(owner, monkeypatch):
    abandon(owner, "r-stuck", monkeypatch)
    assert len(raw_blobs(owner)) == 1 and receives_today(owner) == 1

    call_command("run_lane", "reconcile_inbound_deliveries")
    assert ledger(owner) == ["orphan-cleaned"] and raw_blobs(owner) == []
    assert not EmailInboundDueOwner.objects.exists()
    # Idempotent: a second pass finds nobody due and changes nothing.
    assert reconcile.reconcile_due(25).visited == 0
    # The sender retries: one message, still one charge.
    assert inbound.deliver(simple_mail(), address(owner), "r-stuck").status == "received"
    assert receives_today(owner) == 1 and ledger(owner) == ["received"]


def test_an_owner_not_yet_due_is_not_visited(owner, monkeypatch):
    inbound.deliver(simple_mail(), address(owner), "r-fresh")
    visits = []
    monkeypatch.setattr(Mailbox, "call", lambda uid, name, **kw: visits.append(uid))
    assert reconcile.reconcile_due(25).visited == 0
    assert visits == [] and EmailInboundDueOwner.objects.count() == 1


def test_due_owners_come_earliest_first_then_by_owner():
    now = timezone.now()
    EmailInboundDueOwnerFactory(user_id="b" * 64, due_at=now - timedelta(minutes=5))
    EmailInboundDueOwnerFactory(user_id="a" * 64, due_at=now - timedelta(minutes=5))
    EmailInboundDueOwnerFactory(user_id="c" * 64, due_at=now - timedelta(hours=1))
    EmailInboundDueOwnerFactory(user_id="d" * 64, due_at=now + timedelta(minutes=5))
    assert reconcile.due_owners(25, now) == ["c" * 64, "a" * 64, "b" * 64]
    assert reconcile.due_owners(2, now) == ["c" * 64, "a" * 64]


def test_a_failing_owner_backs_off_and_does_not_block_the_next(owner, outsider, monkeypatch):
    abandon(owner, "r-owner", monkeypatch)
    abandon(outsider, "r-outsider", monkeypatch)
    real = Mailbox.call

    def owner_down(uid: str, name: str, **kwargs: Any) -> Any:
        if uid == owner.stable_user_id:
            raise ConnectionError("shard down")
        return real(uid, name, **kwargs)

    monkeypatch.setattr(Mailbox, "call", owner_down)
    done = reconcile.reconcile_due(25)
    assert (done.visited, done.failed) == (2, 1)
    monkeypatch.undo()
    row = EmailInboundDueOwner.objects.get(user_id=owner.stable_user_id)
    assert (row.attempt_count, row.last_error) == (1, "ConnectionError")
    assert row.due_at > timezone.now() + timedelta(minutes=4)
    assert ledger(owner) == ["storing"] and ledger(outsider) == ["orphan-cleaned"]
    assert not EmailInboundDueOwner.objects.filter(user_id=outsider.stable_user_id).exists()


def test_an_owners_visit_settles_only_that_owners_mailbox(owner, outsider, monkeypatch):
    abandon(owner, "r-mine", monkeypatch)
    abandon(outsider, "r-theirs", monkeypatch)
    EmailInboundDueOwner.objects.filter(user_id=outsider.stable_user_id).update(
        due_at=timezone.now() + timedelta(hours=1)
    )
    reconcile.reconcile_due(25)
    assert ledger(owner) == ["orphan-cleaned"]
    assert ledger(outsider) == ["storing"] and len(raw_blobs(outsider)) == 1


def test_a_deleted_account_drops_its_hint():
    EmailInboundDueOwnerFactory(user_id="e" * 64, due_at=timezone.now() - timedelta(minutes=1))
    assert reconcile.reconcile_due(25).failed == 0
    assert not EmailInboundDueOwner.objects.exists()
