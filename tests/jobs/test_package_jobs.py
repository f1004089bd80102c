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


def with_jobs(jobs: dict) -> dict:
    files = package_files("marker", {"mod.ts": MARKER}, {".": "./mod.ts"})
    manifest = json.loads(files["package.json"])
    manifest["kody"]["jobs"] = jobs
    files["package.json"] = json.dumps(manifest)
    return files


def test_package_json_jobs_are_synced_at_publish_and_run(owner, owner_key, clock, wake):
    nightly = {"export": "default", "schedule": EVERY_MINUTE, "args": {"name": "nightly_ran"}}
    status, body = call(owner_key, "packageSave", {"files": with_jobs({"nightly": nightly})})
    assert status == 200, body
    package_id = body["package"]["id"]
    job = Job.objects.get(id=f"package-job:{package_id}:nightly")
    assert job.storage_id == f"job:package-job:{package_id}:nightly"
    assert job.params_json["target"]["package"] == "@ada/marker"
    next_minute(clock, job.id)
    wake()
    assert ran(owner, "nightly_ran")

    # A publish without the entry removes the job; a bad entry publishes nothing.
    bad = {"export": "missing", "schedule": EVERY_MINUTE}
    status, body = call(
        owner_key, "packageSave", {"packageId": package_id, "files": with_jobs({"x": bad})}
    )
    assert status == 422 and "missing" in json.dumps(body)
    assert Job.objects.filter(id=job.id).exists()
    status, _ = call(owner_key, "packageSave", {"packageId": package_id, "files": with_jobs({})})
    assert status == 200
    assert not Job.objects.filter(id__startswith=f"package-job:{package_id}:").exists()
