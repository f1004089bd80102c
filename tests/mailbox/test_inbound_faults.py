"""A failure at any inbound step is retried with the same delivery id and lands exactly once.

Each case breaks one step, redelivers, and checks: one message, one charge, and exactly one
blob under the owner's raw prefix (the message's own; nothing orphaned).
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from apps.mailbox.actor import Mailbox
from apps.mailbox.errors import BlobUnavailable
from apps.mailbox.models import EmailInboundDueOwner
from apps.mailbox.services import blobstore, inbound
from apps.mailbox.services.inbound import InboundRetry
from kody.blobs.keys import email_raw_key
from kody.userschema.naming import schema_name_for
from tests.mailbox.conftest import address, raw_blobs, receives_today, simple_mail

pytestmark = pytest.mark.django_db

RAW = simple_mail("Invoice 42")


class Killed(BaseException):
    """Stands in for the worker dying: not an Exception, so nothing catches it."""


def exactly_once(owner, delivery_id: str) -> None:
    result = inbound.deliver(RAW, address(owner), delivery_id)
    assert result.status == "received"
    listed = Mailbox.call(owner.stable_user_id, "list_messages")["messages"]
    assert [m["id"] for m in listed] == [result.message_id]
    assert receives_today(owner) == 1
    assert raw_blobs(owner) == [email_raw_key(owner.stable_user_id, result.message_id)]
    again = inbound.deliver(RAW, address(owner), delivery_id)
    assert (again.status, again.message_id) == ("duplicate", result.message_id)
    assert receives_today(owner) == 1


def exactly_once_after(owner, delivery_id: str, message_id: str) -> None:
    listed = Mailbox.call(owner.stable_user_id, "list_messages")["messages"]
    assert [m["id"] for m in listed] == [message_id]
    assert receives_today(owner) == 1
    assert raw_blobs(owner) == [email_raw_key(owner.stable_user_id, message_id)]
    again = inbound.deliver(RAW, address(owner), delivery_id)
    assert (again.status, again.message_id) == ("duplicate", message_id)


def break_once(
    monkeypatch, method: str, *, after: bool, error: BaseException, committed: bool = False
) -> None:
    """Make one Mailbox call fail once: before running, after running (then rolled back), or
    with ``committed`` after its transaction committed (only the reply is lost)."""
    original = inbound._mailbox
    state = {"armed": True}

    def flaky(uid: str, name: str, **kwargs: Any) -> Any:
        if name == method and state["armed"]:
            state["armed"] = False
            if committed:
                original(uid, name, **kwargs)
                raise error
            if after:
                # Run the real method inside a transaction we then abort: its writes vanish.
                from django.db import transaction

                with pytest.raises(RuntimeError), transaction.atomic():
                    original(uid, name, **kwargs)
                    raise RuntimeError("rollback")
            raise error
        return original(uid, name, **kwargs)

    monkeypatch.setattr(inbound, "_mailbox", flaky)


def test_blob_write_fails_then_redelivery_lands_once(owner, monkeypatch):
    real_put = blobstore.put
    calls = {"n": 0}

    def put(key: str, data: bytes) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise BlobUnavailable()
        real_put(key, data)

    monkeypatch.setattr(blobstore, "put", put)
    with pytest.raises(InboundRetry):
        inbound.deliver(RAW, address(owner), "f-blob")
    assert raw_blobs(owner) == [] and receives_today(owner) == 1
    exactly_once(owner, "f-blob")


def test_graph_commit_fails_then_redelivery_lands_once(owner, monkeypatch):
    break_once(monkeypatch, "commit_inbound_graph", after=True, error=RuntimeError("db down"))
    with pytest.raises(InboundRetry):
        inbound.deliver(RAW, address(owner), "f-commit")
    assert Mailbox.call(owner.stable_user_id, "list_messages")["messages"] == []
    assert len(raw_blobs(owner)) == 1  # written before the commit, reused by the retry
    exactly_once(owner, "f-commit")


def ledger_state(owner, delivery_id: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT state FROM "{schema_name_for(owner.stable_user_id)}".email_delivery_events'
            " WHERE provider_event_id = %s",
            [delivery_id],
        )
        return cursor.fetchone()[0]


def test_the_commits_reply_lost_then_redelivery_is_a_duplicate(owner, monkeypatch):
    error = RuntimeError("reply lost")
    break_once(monkeypatch, "commit_inbound_graph", after=True, error=error, committed=True)
    with pytest.raises(InboundRetry):
        inbound.deliver(RAW, address(owner), "f-reply")
    # Graph and "received" committed together: the retry finds a finished delivery.
    assert ledger_state(owner, "f-reply") == "received"
    [listed] = Mailbox.call(owner.stable_user_id, "list_messages")["messages"]
    exactly_once_after(owner, "f-reply", listed["id"])


def test_a_committed_delivery_left_storing_is_finalized_by_the_reconcile_lane(owner):
    """A delivery committed while finalizing was still a separate step, its finalize lost."""
    first = inbound.deliver(RAW, address(owner), "f-final-lane")
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".email_delivery_events'
            " SET state = 'storing', storage_lease = 'old', reconcile_after = %s",
            [timezone.now()],
        )
    due_now(owner)
    call_command("run_lane", "reconcile_inbound_deliveries")
    assert ledger_state(owner, "f-final-lane") == "received"
    assert not EmailInboundDueOwner.objects.filter(user_id=owner.stable_user_id).exists()
    exactly_once_after(owner, "f-final-lane", first.message_id)


def due_now(owner) -> None:
    EmailInboundDueOwner.objects.filter(user_id=owner.stable_user_id).update(due_at=timezone.now())


def test_worker_killed_between_blob_and_commit_then_redelivery_lands_once(owner, monkeypatch):
    break_once(monkeypatch, "commit_inbound_graph", after=False, error=Killed())
    with pytest.raises(Killed):
        inbound.deliver(RAW, address(owner), "f-kill")
    exactly_once(owner, "f-kill")


def test_an_abandoned_delivery_has_its_blob_cleaned_by_the_reconcile_lane(owner, monkeypatch):
    break_once(monkeypatch, "commit_inbound_graph", after=False, error=Killed())
    with pytest.raises(Killed):
        inbound.deliver(RAW, address(owner), "f-abandon")
    assert len(raw_blobs(owner)) == 1
    with connection.cursor() as cursor:
        cursor.execute(
            f'UPDATE "{schema_name_for(owner.stable_user_id)}".email_delivery_events'
            " SET reconcile_after = %s",
            [timezone.now()],
        )
    due_now(owner)
    call_command("run_lane", "reconcile_inbound_deliveries")
    assert raw_blobs(owner) == []
    assert ledger_state(owner, "f-abandon") == "orphan-cleaned"
    # The sender tries again later: the delivery restarts and still charges only once.
    monkeypatch.undo()
    exactly_once(owner, "f-abandon")


def test_a_stale_lease_cannot_commit_after_a_newer_attempt_took_over(owner):
    uid = owner.stable_user_id
    claim = Mailbox.call(
        uid, "claim_delivery", delivery_id="f-lease", inbox_id="i", fingerprint="f", raw_size=1
    )
    old = Mailbox.call(uid, "begin_storing", delivery_id="f-lease")["lease"]
    Mailbox.call(uid, "begin_storing", delivery_id="f-lease")
    message = {
        "id": claim["messageId"],
        "inbox_id": "i",
        "raw_mime_key": email_raw_key(uid, claim["messageId"]),
    }
    from apps.mailbox.errors import StorageLeaseLost

    with pytest.raises(StorageLeaseLost):
        Mailbox.call(
            uid, "commit_inbound_graph", delivery_id="f-lease", lease=old, message=message,
            attachments=[],
        )  # fmt: skip
