"""A job can run a published package export: ``{"package", "export", "args"}``, from the
bundle, in the sandbox, as the owner under the scheduling token's grant."""

from __future__ import annotations

import json

import pytest

from apps.jobs.models import Job
from tests.jobs.test_job_grants import EVERY_MINUTE, call, job_runs, next_minute, ran, schedule
from tests.packages.test_package_exports import DECLARE, package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

MARKER = (
    DECLARE
    + "export default async (args: { name: string }) => {\n"
    + "  await kody.valueSet({ name: args.name, value: 'the export ran' });\n"
    + "  return args.name;\n};\n"
)


def publish_marker(raw: str) -> dict:
    status, body = call(
        raw,
        "packageSave",
        {"files": package_files("marker", {"mod.ts": MARKER}, {".": "./mod.ts"})},
    )
    assert status == 200, body
    return body["package"]


def test_a_job_runs_a_package_export_and_records_the_run(owner, owner_key, clock, wake):
    publish_marker(owner_key)
    target = {"package": "@ada/marker", "export": "default", "args": {"name": "from_job"}}
    job_id = schedule(owner_key, target)
    assert Job.objects.get(id=job_id).params_json["target"] == target
    next_minute(clock, job_id)
    wake()
    assert ran(owner, "from_job")
    [run] = job_runs(owner, job_id)
    assert run["status"] == "success"


def test_a_package_target_must_name_a_published_export_of_the_caller(owner_key, outsider_key):
    publish_marker(owner_key)
    missing = {"package": "@ada/marker", "export": "nope", "args": {}}
    status, body = call(
        owner_key, "jobSchedule", {"name": "x", "target": missing, "schedule": EVERY_MINUTE}
    )
    assert status == 404 and body["error"]["code"] == "export_not_found"
    theirs = {"package": "@ada/marker", "export": "default", "args": {"name": "stolen"}}
    status, body = call(
        outsider_key, "jobSchedule", {"name": "x", "target": theirs, "schedule": EVERY_MINUTE}
    )
    assert status == 404, json.dumps(body)
