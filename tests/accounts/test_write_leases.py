"""Account write leases around every guarded mutation, and the deletion fence (seed 002).

Every mutating capability runs inside the account policy's ``write_guard``: it takes a lease
in the caller's UserMeter, runs, and releases it. A deletion marks the meter (no new lease
after that), waits a bounded time for the leases held, and stops with the holder's name when
one outlives the bound.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connections
from django.utils import timezone

from apps.accounts.deletion import job
from apps.accounts.models import AccountDeletion, DeletionStatus, User
from apps.accounts.policy import write_guard
from apps.entitlements.services import metering
from apps.packages.models import ValueEntry
from kody.capabilities import registry
from kody.errors import AccountDeleting
from tests.cast import bearer

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _short_drain(settings: Any) -> None:
    settings.KODY_DELETION_DRAIN_SECONDS = 0.3


def wrap(monkeypatch: pytest.MonkeyPatch, name: str, around: Any) -> None:
    """Replace capability ``name``'s handler with ``around(original, ctx, **args)``."""
    cap = registry.get(name)
    original = cap.handler
    replaced = dataclasses.replace(cap, handler=lambda ctx, **args: around(original, ctx, **args))
    monkeypatch.setitem(registry._registry, name, replaced)


def set_value(api: Any, raw: str, name: str, value: str) -> Any:
    return api.post(
        "/api/v1/capabilities/valueSet",
        {"name": name, "value": value},
        format="json",
        **bearer(raw),
    )


def holders(user: User) -> list[str]:
    return [lease["holder"] for lease in metering.list_write_leases(user.stable_user_id)]


def stored_values(user: User) -> list[str]:
    return sorted(
        ValueEntry.objects.filter(bucket__user_id=user.stable_user_id).values_list(
            "value", flat=True
        )
    )


def test_a_mutation_holds_one_lease_while_it_runs_and_releases_it(
    monkeypatch, api, owner, owner_token
):
    seen: list[list[dict[str, Any]]] = []

    def spy(original: Any, ctx: Any, **args: Any) -> Any:
        seen.append(metering.list_write_leases(ctx.user.stable_user_id))
        return original(ctx, **args)

    wrap(monkeypatch, "valueSet", spy)
    response = set_value(api, owner_token[1], "city", "Lisbon")

    assert response.status_code == 200, response.content
    assert [[lease["holder"] for lease in leases] for leases in seen] == [["api:valueSet"]]
    assert metering.list_write_leases(owner.stable_user_id) == []
    assert stored_values(owner) == ["Lisbon"]


def test_a_read_takes_no_lease(monkeypatch, api, owner, owner_token):
    seen: list[int] = []

    def spy(original: Any, ctx: Any, **args: Any) -> Any:
        seen.append(len(metering.list_write_leases(ctx.user.stable_user_id)))
        return original(ctx, **args)

    wrap(monkeypatch, "valueList", spy)
    response = api.post(
        "/api/v1/capabilities/valueList", {}, format="json", **bearer(owner_token[1])
    )
    assert response.status_code == 200, response.content
    assert seen == [0]


def test_a_failed_mutation_still_releases_its_lease(monkeypatch, api, owner, owner_token):
    def crash(original: Any, ctx: Any, **args: Any) -> Any:
        raise RuntimeError("handler crashed")

    wrap(monkeypatch, "valueSet", crash)
    api.raise_request_exception = False
    response = set_value(api, owner_token[1], "city", "Lisbon")
    assert response.status_code == 500
    assert metering.list_write_leases(owner.stable_user_id) == []


def test_nested_guards_for_one_user_share_the_outer_lease(owner, outsider):
    with write_guard(owner, "outer"):
        with write_guard(owner, "inner"), write_guard(outsider, "theirs"):
            assert holders(owner) == ["outer"]
            assert holders(outsider) == ["theirs"]
    assert holders(owner) == holders(outsider) == []


def test_the_meter_tombstone_alone_refuses_a_mutation_and_nothing_is_written(
    api, owner, owner_token, outsider, outsider_token
):
    # The meter is marked before users.deleting_at is visible to this caller.
    metering.mark_deleting(owner.stable_user_id, timezone.now().isoformat())
    assert User.objects.get(pk=owner.pk).deleting_at is None

    refused = set_value(api, owner_token[1], "city", "Lisbon")
    assert refused.status_code == 409
    assert refused.json()["error"]["code"] == "account_deleting"
    assert stored_values(owner) == []
    assert metering.list_write_leases(owner.stable_user_id) == []

    # Another account is untouched by the owner's fence.
    assert set_value(api, outsider_token[1], "city", "Porto").status_code == 200
    assert stored_values(outsider) == ["Porto"]

    metering.unmark_deleting(owner.stable_user_id)
    assert set_value(api, owner_token[1], "city", "Lisbon").status_code == 200


def test_a_mutation_outliving_the_drain_bound_stops_the_deletion_with_its_holder(
    monkeypatch, api, owner, owner_token
):
    outcome: dict[str, Any] = {}

    def write_then_delete(original: Any, ctx: Any, **args: Any) -> Any:
        result = original(ctx, **args)
        # A deletion starts while this write still holds its lease.
        outcome["deletion"] = job.run(job.start(owner, requested_by="test"))
        return result

    wrap(monkeypatch, "valueSet", write_then_delete)
    assert set_value(api, owner_token[1], "city", "Lisbon").status_code == 200

    deletion = outcome["deletion"]
    assert deletion.status == DeletionStatus.RETAINED
    assert deletion.step == "drain"
    assert "api:valueSet" in deletion.last_error
    assert stored_values(owner) == ["Lisbon"]  # the account and its data are kept

    # The write finished and released its lease: a rerun deletes everything, that write too.
    monkeypatch.undo()
    call_command("purge_account", owner.email, "--yes")
    assert not User.objects.filter(pk=owner.pk).exists()
    assert stored_values(owner) == []


def test_a_deletion_waits_for_a_racing_writer_and_nothing_lands_after_the_drain(
    monkeypatch, settings, api, owner, owner_token
):
    settings.KODY_DELETION_DRAIN_SECONDS = 20
    inside, finish = threading.Event(), threading.Event()

    def slow(original: Any, ctx: Any, **args: Any) -> Any:
        inside.set()
        assert finish.wait(20)
        return original(ctx, **args)

    wrap(monkeypatch, "valueSet", slow)
    answers: list[int] = []

    def writer() -> None:
        try:
            answers.append(set_value(api, owner_token[1], "city", "Lisbon").status_code)
        finally:
            connections.close_all()

    racer = threading.Thread(target=writer)
    racer.start()
    assert inside.wait(20)

    steps: list[str] = []

    def on_step(report: Any) -> None:
        steps.append(report.step)
        if report.step == "mark":
            # Marked: the token no longer opens the account, and a writer that authenticated
            # before the mark is refused its lease; then the first writer may finish.
            late = set_value(api, owner_token[1], "late", "never")
            steps.append(f"late:{late.status_code}:{late.json()['error']['code']}")
            with pytest.raises(AccountDeleting):
                with write_guard(owner, "api:valueSet"):
                    ValueEntry.objects.none()  # never reached
            steps.append("guard refused")
            finish.set()

    deletion = job.run(job.start(owner, requested_by="test"), on_step=on_step)
    racer.join(20)

    assert answers == [200]  # the write that held its lease completed
    assert steps[:4] == ["mark", "late:401:unauthenticated", "guard refused", "drain"]
    assert deletion.status == DeletionStatus.COMPLETE, deletion.last_error
    assert stored_values(owner) == []  # it landed before the drain, and was deleted with the rest
    assert not AccountDeletion.objects.filter(subject_user_id=owner.stable_user_id).exists()


def test_a_lease_repaired_mid_write_is_reported_as_lost(
    monkeypatch, api, owner, owner_token, operator
):
    def repaired_meanwhile(original: Any, ctx: Any, **args: Any) -> Any:
        result = original(ctx, **args)
        (lease,) = metering.list_write_leases(ctx.user.stable_user_id)
        metering.prepare_lease_repair(ctx.user.stable_user_id, lease["token"], "r-1")
        metering.finalize_lease_repair(ctx.user.stable_user_id, lease["token"], "r-1")
        return result

    wrap(monkeypatch, "valueSet", repaired_meanwhile)
    response = set_value(api, owner_token[1], "city", "Lisbon")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "write_lease_lost"
    assert metering.list_write_leases(owner.stable_user_id) == []
