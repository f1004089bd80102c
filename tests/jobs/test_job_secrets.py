"""Secret values never land in job parameters.

A job's target is stored, listed by ``jobGet``/``jobList``, shown to operators in the admin and
exported. So a target that would carry a secret value — an argument its capability's schema
marks ``"x-kody-secret": true`` (``secretSet``'s value, each value of ``secretSetMany``), at
any depth, even inside a job that schedules a job — is refused when it is scheduled, and the
value appears in no reply. A row written before that refusal existed is shown redacted.
"""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from apps.jobs.models import Job
from kody.capabilities import get
from kody.capabilities.secrecy import REDACTED, secret_paths
from tests.jobs.factories import JobFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "hunter2-do-not-store"
DAILY = {"type": "cron", "expression": "0 9 * * *"}
SET_SECRET = {"capability": "secretSet", "args": {"name": "API_KEY", "value": VALUE}}


def call(raw: str, name: str, payload: dict | None = None) -> tuple[int, str]:
    response = APIClient().post(
        f"/api/v1/capabilities/{name}",
        payload or {},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.content.decode()


@pytest.mark.parametrize(
    "target",
    [
        SET_SECRET,
        {"capability": "secretSetMany", "args": {"secrets": [{"name": "A", "value": VALUE}]}},
        {  # a job that would schedule the secret-setting job
            "capability": "jobSchedule",
            "args": {"name": "inner", "target": SET_SECRET, "schedule": DAILY},
        },
    ],
    ids=["secretSet", "secretSetMany", "nested"],
)
def test_a_job_whose_target_carries_a_secret_is_refused_and_the_value_is_not_echoed(
    owner, owner_token, target
):
    raw = owner_token[1]
    status, body = call(raw, "jobSchedule", {"name": "leak", "target": target, "schedule": DAILY})
    assert status == 422
    assert json.loads(body)["error"]["code"] == "secret_in_job_target"
    assert VALUE not in body
    assert not Job.objects.filter(user_id=owner.stable_user_id).exists()
    status, body = call(
        raw, "jobScheduleOnce", {"name": "leak", "target": target, "runAt": "2031-01-01T09:00"}
    )
    assert status == 422 and VALUE not in body


def test_a_job_cannot_be_retargeted_to_carry_a_secret(owner, owner_token):
    raw = owner_token[1]
    status, body = call(
        raw,
        "jobSchedule",
        {"name": "usage", "target": {"capability": "accountUsage", "args": {}}, "schedule": DAILY},
    )
    job_id = json.loads(body)["id"]
    status, body = call(raw, "jobUpdate", {"jobId": job_id, "target": SET_SECRET})
    assert status == 422 and VALUE not in body
    assert Job.objects.get(id=job_id).params_json["target"]["capability"] == "accountUsage"


def test_the_marks_are_in_the_capability_schemas_not_a_list_of_names():
    assert get("secretSet").input_schema["properties"]["value"]["x-kody-secret"] is True
    assert secret_paths("secretSet", {"name": "A", "value": "v"}) == ["/value"]
    assert secret_paths("secretSetMany", {"secrets": [{"name": "A", "value": "v"}]}) == [
        "/secrets/0/value"
    ]
    assert secret_paths("valueSet", {"name": "A", "value": "plain"}) == []


def test_an_old_row_holding_a_secret_is_never_shown(owner, owner_token, operator_client):
    """Written before scheduling refused it (the only way such a row exists)."""
    legacy = JobFactory(user_id=owner.stable_user_id, params_json={"target": SET_SECRET})
    raw = owner_token[1]

    for name, payload in [
        ("jobGet", {"jobId": legacy.id}),
        ("jobList", {}),
        ("accountExportSection", {"section": "d1_table", "table": "jobs"}),
    ]:
        status, body = call(raw, name, payload)
        assert status == 200, body
        assert VALUE not in body and REDACTED in body, name

    for path in ("/admin/jobs/job/", f"/admin/jobs/job/{legacy.id}/change/"):
        page = operator_client.get(path)
        assert page.status_code == 200
        assert VALUE not in page.content.decode()
    detail = operator_client.get(f"/admin/jobs/job/{legacy.id}/change/").content.decode()
    assert "secretSet" in detail and REDACTED in detail


def test_another_users_jobs_are_not_affected_and_not_visible(owner, owner_token, outsider):
    from apps.accounts.services.tokens import create_token

    legacy = JobFactory(user_id=owner.stable_user_id, params_json={"target": SET_SECRET})
    outsider_raw = create_token(outsider, "theirs")[1]
    status, body = call(outsider_raw, "jobGet", {"jobId": legacy.id})
    assert status == 404 and VALUE not in body
    status, body = call(
        outsider_raw, "accountExportSection", {"section": "d1_table", "table": "jobs"}
    )
    assert status == 200 and legacy.id not in body
