"""Jobs count against storage_bytes: a job's row and every run's record charge the meter in the
call that writes them, weighed as reconciliation weighs them, so the nightly reconcile finds
the meter already right. Past the limit a job is refused with nothing stored, and a run keeps
a minimal record instead of its output."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from apps.entitlements.plans import limit_for
from apps.entitlements.services import metering
from apps.entitlements.services.storage import payload_bytes
from apps.jobs.actor import RunLog
from apps.jobs.actor.records import LEDGER_RETENTION
from apps.jobs.models import Job
from kody.lanes import run_lane
from kody.userschema.models import UserSchema

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

USAGE = {"capability": "accountUsage", "args": {}}
EVERY_MINUTE = {"type": "cron", "expression": "* * * * *"}


def rest(raw: str, name: str, payload: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = APIClient().post(
        f"/api/v1/capabilities/{name}",
        payload,
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.json()


def schedule(raw: str, name: str = "probe") -> dict[str, Any]:
    status, body = rest(
        raw, "jobSchedule", {"name": name, "target": USAGE, "schedule": EVERY_MINUTE}
    )
    assert status == 200, body
    return body


def stored(user) -> int:  # type: ignore[no-untyped-def]
    return int(metering.read_storage_bytes(user.stable_user_id)["bytes"])


def job_bytes(user) -> int:  # type: ignore[no-untyped-def]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(sum(octet_length(j.*::text)), 0) FROM jobs j WHERE j.user_id = %s",
            [user.stable_user_id],
        )
        return int(cursor.fetchone()[0])


def fill(user, *, room: int) -> int:  # type: ignore[no-untyped-def]
    """Charge the meter (no rows behind it) until ``room`` bytes are left; answers the padding,
    which a reconcile (rows only) takes off again."""
    limit = limit_for(user.plan, "storage_bytes")
    padding = limit - stored(user) - room
    metering.reserve_storage_bytes(user.stable_user_id, padding, limit)
    return padding


def settle(user) -> int:  # type: ignore[no-untyped-def]
    """Reconcile once so rows made outside any writer (the cast's tokens) are counted; the
    meter after is the baseline a test's own writes add to."""
    return int(metering.reconcile_storage_bytes(user.stable_user_id)["bytes"])


def runs_of(user, job_id: str) -> list[dict[str, Any]]:  # type: ignore[no-untyped-def]
    page = RunLog.call(user.stable_user_id, "list_runs", {"job_id": job_id}, None, 500)
    return page["runs"]


def test_a_job_reserves_its_row_updates_charge_the_change_and_delete_releases(owner, owner_key):
    base = settle(owner)
    job = schedule(owner_key)
    assert job_bytes(owner) > 0
    assert stored(owner) == base + job_bytes(owner)
    status, _ = rest(owner_key, "jobUpdate", {"jobId": job["id"], "name": "probe " + "x" * 200})
    assert status == 200
    assert stored(owner) == base + job_bytes(owner)
    status, _ = rest(owner_key, "jobDelete", {"jobId": job["id"]})
    assert status == 200
    assert job_bytes(owner) == 0 and stored(owner) == base
    assert settle(owner) == base


def test_a_job_over_the_limit_is_refused_and_nothing_is_stored(
    owner, owner_key, outsider, outsider_key
):
    base = settle(owner)
    limit = limit_for(owner.plan, "storage_bytes")
    metering.reserve_storage_bytes(owner.stable_user_id, limit - base - 10, limit)
    status, body = rest(
        owner_key, "jobSchedule", {"name": "big", "target": USAGE, "schedule": EVERY_MINUTE}
    )
    assert status == 429, body
    error = body["error"]
    assert error["code"] == "limit_reached" and error["details"]["resource"] == "storage_bytes"
    assert not Job.objects.filter(user_id=owner.stable_user_id).exists()
    assert stored(owner) == limit - 10
    # Another person's meter is their own: their job fits and charges them alone.
    outsider_base = settle(outsider)
    schedule(outsider_key)
    assert stored(outsider) == outsider_base + job_bytes(outsider)
    assert stored(owner) == limit - 10


def test_an_update_past_the_limit_is_refused_and_the_job_is_unchanged(owner, owner_key):
    base = settle(owner)
    job = schedule(owner_key)
    limit = limit_for(owner.plan, "storage_bytes")
    metering.reserve_storage_bytes(owner.stable_user_id, limit - stored(owner) - 5, limit)
    status, body = rest(owner_key, "jobUpdate", {"jobId": job["id"], "name": "y" * 200})
    assert status == 429 and body["error"]["details"]["resource"] == "storage_bytes"
    assert Job.objects.get(id=job["id"]).name == "probe"
    assert stored(owner) == limit - 5
    del base


def test_a_run_reserves_its_record_and_reconcile_agrees_to_the_byte(
    owner, owner_key, outsider, clock, wake
):
    base = settle(owner)
    outsider_base = settle(outsider)
    job = schedule(owner_key)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at + timedelta(seconds=1))
    wake()
    runs = runs_of(owner, job["id"])
    assert {r["surface"] for r in runs} == {"job", "execute"}
    charged = stored(owner)
    # More than the job row: the run records (two runs and a log line) were charged too.
    assert charged > base + job_bytes(owner)
    # A triage note is the owner's text and is charged as well.
    status, _ = rest(
        owner_key,
        "runUpdate",
        {"runId": runs[0]["id"], "errorTriage": "expected", "triageNote": "n" * 300},
    )
    assert status == 200 and stored(owner) >= charged + 300
    before = stored(owner)
    result = metering.reconcile_storage_bytes(owner.stable_user_id)
    assert result["previous"] == before and result["bytes"] == before
    # Public rows alone are the job and the baseline: the rest lives in the user's schema.
    assert payload_bytes(owner.stable_user_id) == base + job_bytes(owner)
    assert stored(outsider) == outsider_base


def test_a_user_without_a_schema_or_without_run_tables_has_no_run_record_bytes(owner):
    from apps.entitlements.services.storage import schema_payload_bytes

    assert not UserSchema.objects.filter(user_id=owner.stable_user_id).exists()
    assert schema_payload_bytes(owner.stable_user_id) == 0
    settle(owner)  # makes the schema, with the meter's tables only
    assert UserSchema.objects.get(user_id=owner.stable_user_id).table_sets == []
    assert schema_payload_bytes(owner.stable_user_id) == 0


def test_reconcile_counts_run_records_when_only_the_job_manager_made_the_tables(
    owner, owner_key, clock, wake
):
    """JobManager and RunLog share the run tables; whichever made them, they are counted."""
    settle(owner)
    job = schedule(owner_key)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at + timedelta(seconds=1))
    wake()
    UserSchema.objects.filter(user_id=owner.stable_user_id).update(table_sets=["jobs.JobManager"])
    before = stored(owner)
    assert before > payload_bytes(owner.stable_user_id)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == before


def test_a_run_over_the_limit_keeps_a_minimal_record_and_the_job_keeps_its_schedule(
    owner, owner_key, clock, wake
):
    settle(owner)
    job = schedule(owner_key)
    first = Job.objects.get(id=job["id"]).next_run_at
    limit = limit_for(owner.plan, "storage_bytes")
    padding = fill(owner, room=5)
    clock.move_to(first + timedelta(seconds=1))
    wake()
    runs = runs_of(owner, job["id"])
    parent = next(r for r in runs if r["surface"] == "job")
    assert parent["status"] == "success"
    assert parent["metadata"]["outputDropped"] == "storage_limit_exceeded"
    assert parent["metadata"]["droppedLogLines"] == 1
    assert parent["metadata"]["scheduledFor"] == first.isoformat()
    assert RunLog.call(owner.stable_user_id, "get_run", parent["id"])["logs"] == []
    # The occurrence is done and the next one is scheduled: no retry loop over the meter.
    row = Job.objects.get(id=job["id"])
    assert row.next_run_at == first + timedelta(minutes=1) and row.claim_token is None
    # The minimal records are charged (past the limit) and reconcile agrees exactly.
    over = stored(owner)
    assert over > limit - 5
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == over - padding
    # Still full, the next minute runs again, also with a minimal record.
    padding = fill(owner, room=5)
    clock.move_to(first + timedelta(minutes=1, seconds=1))
    wake()
    parents = [r for r in runs_of(owner, job["id"]) if r["surface"] == "job"]
    assert len(parents) == 2
    assert all(r["metadata"]["outputDropped"] == "storage_limit_exceeded" for r in parents)
    over = stored(owner)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == over - padding


def test_a_package_run_recorded_through_the_run_log_is_charged_and_refused_output(owner):
    base = settle(owner)
    run = {
        "surface": "execute",
        "status": "error",
        "name": "call",
        "started_at": "2025-03-14T12:00:00+00:00",
        "finished_at": "2025-03-14T12:00:01+00:00",
        "error_name": "Boom",
        "error_message": "e" * 3000,
    }
    lines = [{"message": "m" * 1000} for _ in range(5)]
    first = RunLog.call(owner.stable_user_id, "record", run, lines)
    charged = stored(owner) - base
    assert charged > 3000 + 5 * 1000
    padding = fill(owner, room=100)
    second = RunLog.call(owner.stable_user_id, "record", run, lines)
    kept = RunLog.call(owner.stable_user_id, "get_run", second)
    assert kept["status"] == "error" and kept["errorName"] == "Boom"
    assert kept["errorMessage"] == "e" * 200 and kept["logs"] == []
    assert kept["metadata"] == {"outputDropped": "storage_limit_exceeded", "droppedLogLines": 5}
    assert len(RunLog.call(owner.stable_user_id, "get_run", first)["logs"]) == 5
    over = stored(owner)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == over - padding


def test_pruning_runs_and_invocations_gives_their_bytes_back(owner, owner_key, clock, wake):
    base = settle(owner)
    job = schedule(owner_key)
    clock.move_to(Job.objects.get(id=job["id"]).next_run_at + timedelta(seconds=1))
    wake()
    RunLog.call(owner.stable_user_id, "begin_invocation", ledger_key(1), "h", {})
    assert stored(owner) > base + job_bytes(owner)
    clock.move_to(timezone.now() + LEDGER_RETENTION + timedelta(days=1))
    pruned = RunLog.call(owner.stable_user_id, "prune")
    assert pruned["runs"] == 2 and pruned["ledger"] == 1
    assert stored(owner) == base + job_bytes(owner)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["previous"] == stored(owner)


def test_job_retention_releases_the_pruned_jobs_bytes(
    owner, owner_key, outsider, outsider_key, django_capture_on_commit_callbacks
):
    base = settle(owner)
    job = schedule(owner_key, name="old")
    schedule(outsider_key)
    outsider_before = stored(outsider)
    old = Job.objects.get(id=job["id"]).updated_at - timedelta(days=400)
    Job.objects.filter(id=job["id"]).update(enabled=False, updated_at=old)
    settle(owner)  # the hand-made change above, as the nightly reconcile would count it
    with django_capture_on_commit_callbacks(execute=True):
        run_lane("job_retention")
    assert not Job.objects.filter(id=job["id"]).exists()
    assert stored(owner) == base
    assert stored(outsider) == outsider_before


def ledger_key(n: int) -> dict[str, str]:
    return {"token_id": "t", "package_id": "p", "export_name": "e", "idempotency_key": f"k{n}"}


def test_an_invocations_stored_response_is_charged_and_dropped_past_the_limit(owner, outsider):
    base = settle(owner)
    outsider_base = settle(outsider)
    uid = owner.stable_user_id
    first = RunLog.call(uid, "begin_invocation", ledger_key(1), "h", {})
    pending = stored(owner)
    assert first["outcome"] == "new" and pending > base
    assert RunLog.call(uid, "finish_invocation", first["id"], "success", {"body": "r" * 500})
    assert stored(owner) > pending + 500
    assert metering.reconcile_storage_bytes(uid)["previous"] == stored(owner)

    padding = fill(owner, room=50)
    second = RunLog.call(uid, "begin_invocation", ledger_key(2), "h", {})
    assert RunLog.call(uid, "finish_invocation", second["id"], "success", {"body": "r" * 500})
    replay = RunLog.call(uid, "begin_invocation", ledger_key(2), "h", {})
    assert replay["outcome"] == "replay" and replay["status"] == "success"
    assert replay["response"] == {"dropped": "storage_limit_exceeded"}
    kept = RunLog.call(uid, "begin_invocation", ledger_key(1), "h", {})
    assert kept["response"] == {"body": "r" * 500}
    over = stored(owner)
    assert metering.reconcile_storage_bytes(uid)["bytes"] == over - padding
    assert stored(outsider) == outsider_base


def test_a_packages_declared_job_is_charged_even_when_full(owner, clock):
    """Synced after its publish committed (the source already passed the limit): refusing it
    would leave the publish with part of its jobs."""
    from apps.jobs.actor.manager import JobManager

    settle(owner)
    padding = fill(owner, room=5)
    jid = "package-job:pkg-1:nightly"
    JobManager.call(
        owner.stable_user_id,
        "create",
        job={
            "id": jid,
            "name": "nightly",
            "source_id": "",
            "storage_id": f"job:{jid}",
            "params_json": {"target": {"package": "@ada/pkg", "export": "default", "args": {}}},
            "schedule_json": EVERY_MINUTE,
            "timezone": "UTC",
            "next_run_at": (timezone.now() + timedelta(minutes=1)).isoformat(),
            "caller_context_json": {"userId": owner.stable_user_id, "surface": "job"},
        },
    )
    assert Job.objects.filter(id=jid).exists()
    over = stored(owner)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == over - padding


def test_pausing_expiring_and_resuming_a_job_work_while_full(owner, owner_key, clock):
    settle(owner)
    job = schedule(owner_key)
    padding = fill(owner, room=0)
    # An expiry grows the row (it was NULL) and still goes through: it stops the job.
    until = (timezone.now() + timedelta(days=3)).isoformat()
    status, body = rest(owner_key, "jobUpdate", {"jobId": job["id"], "expiresAt": until})
    assert status == 200, body
    assert Job.objects.get(id=job["id"]).expires_at is not None
    for enabled in (False, True):
        status, body = rest(owner_key, "jobUpdate", {"jobId": job["id"], "enabled": enabled})
        assert status == 200, body
        assert Job.objects.get(id=job["id"]).enabled is enabled
    over = stored(owner)
    assert metering.reconcile_storage_bytes(owner.stable_user_id)["bytes"] == over - padding
