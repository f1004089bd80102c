"""The transactional outbox: written with the transaction, relayed at least once after it."""

from __future__ import annotations

import pytest
from django.db import connection, transaction

from kody import outbox
from kody.lanes import run_lane
from kody.outbox.models import OutboxMessage
from tests.kernel import sample_actors
from tests.kernel.sample_actors import Probe, ProbeFailed

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _clean_probe() -> None:
    sample_actors.outbox_runs.clear()
    sample_actors.outbox_failures.clear()


def no_kick(monkeypatch: pytest.MonkeyPatch) -> None:
    """No relay right after COMMIT: as if the process died there. The tests relay by hand."""
    monkeypatch.setattr("kody.outbox.core._kick", lambda: None)


def test_an_effect_commits_with_its_transaction_and_relays_once(monkeypatch):
    no_kick(monkeypatch)  # the process "dies" right after COMMIT: nothing ran on_commit work
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            outbox.enqueue("tests.outbox_probe", {"tag": "rolled-back"}, key="k-rolled-back")
            raise RuntimeError("the transaction fails")
    with transaction.atomic():
        assert outbox.enqueue("tests.outbox_probe", {"tag": "kept"}, key="k-kept") is True
        assert outbox.enqueue("tests.outbox_probe", {"tag": "kept"}, key="k-kept") is False
    assert sample_actors.outbox_runs == []
    assert outbox.relay().sent == 1
    assert sample_actors.outbox_runs == ["kept"]
    assert not OutboxMessage.objects.exists()
    assert outbox.relay().handled == 0  # relayed once, then gone


def test_an_actor_method_writes_its_effect_in_the_calls_transaction(
    owner_id, outsider_id, inline_actors, monkeypatch
):
    no_kick(monkeypatch)
    assert Probe.call(owner_id, "emit", "owner-1") == 1
    with pytest.raises(ProbeFailed):
        Probe.call(outsider_id, "emit", "outsider-1", then_fail=True)
    keys = set(OutboxMessage.objects.values_list("key", flat=True))
    assert keys == {f"probe:{owner_id}:owner-1"}  # the failed call's effect rolled back with it
    run_lane("outbox_relay")
    assert sample_actors.outbox_runs == ["owner-1"]


def test_a_failing_task_is_retried_with_backoff_until_it_succeeds(monkeypatch):
    no_kick(monkeypatch)
    sample_actors.outbox_failures["flaky"] = 1
    outbox.enqueue("tests.outbox_probe", {"tag": "flaky"}, key="k-flaky")
    report = outbox.relay()
    assert (report.sent, report.failed) == (0, 1)
    message = OutboxMessage.objects.get(key="k-flaky")
    assert message.attempts == 1 and message.last_error == "RuntimeError"
    assert outbox.relay().handled == 0  # backing off: not due yet
    OutboxMessage.objects.filter(key="k-flaky").update(available_at=message.created_at)
    assert outbox.relay().sent == 1
    assert sample_actors.outbox_runs == ["flaky"]
    assert not OutboxMessage.objects.exists()


def test_a_message_claimed_by_a_relay_that_died_is_taken_again_after_its_lease(monkeypatch):
    from kody.outbox.core import _claim

    no_kick(monkeypatch)
    outbox.enqueue("tests.outbox_probe", {"tag": "orphaned"}, key="k-orphaned")
    assert _claim("default") is not None  # a relay claimed it, then died before running it
    assert outbox.relay().handled == 0  # another relay leaves a claimed message alone
    with connection.cursor() as cursor:  # the claim lease runs out
        cursor.execute("UPDATE kody_outbox SET available_at = now() - interval '1 second'")
    assert outbox.relay().sent == 1
    assert sample_actors.outbox_runs == ["orphaned"]


def test_an_unknown_task_stays_in_the_outbox(monkeypatch):
    no_kick(monkeypatch)
    outbox.enqueue("tests.no_such_task", {}, key="k-unknown")
    assert outbox.relay().failed == 1
    assert OutboxMessage.objects.get(key="k-unknown").last_error == "LookupError"


def test_relay_refuses_to_run_inside_a_transaction():
    with pytest.raises(RuntimeError), transaction.atomic():
        outbox.relay()
