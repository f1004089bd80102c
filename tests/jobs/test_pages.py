"""/account/jobs and /account/activity: the owner's jobs and runs, nobody else's."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.jobs import services
from apps.jobs.actor import RunLog
from apps.jobs.models import Job
from kody.capabilities import Context

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def job(owner):  # type: ignore[no-untyped-def]
    return services.schedule_job(
        Context(user=owner),
        name="morning digest",
        target={"capability": "accountUsage", "args": {}},
        schedule={"type": "cron", "expression": "30 7 * * *"},
        tz="America/New_York",
    )


def browser(user) -> Client:  # type: ignore[no-untyped-def]
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_sees_next_runs_in_the_jobs_time_zone(owner, job):
    page = browser(owner).get(f"/account/jobs/{job['id']}").content.decode()
    assert "morning digest" in page and "America/New_York" in page
    assert page.count(" 07:30 E") == 5  # five upcoming runs, 07:30 EST or EDT
    listing = browser(owner).get("/account/jobs").content.decode()
    assert job["nextRunLocal"] in listing


def test_pause_resume_and_run_now_from_the_page(owner, job):
    client = browser(owner)
    client.post(f"/account/jobs/{job['id']}/pause")
    assert Job.objects.get(id=job["id"]).enabled is False
    client.post(f"/account/jobs/{job['id']}/resume")
    assert Job.objects.get(id=job["id"]).enabled is True
    response = client.post(f"/account/jobs/{job['id']}/run", follow=True)
    assert "runs shortly" in response.content.decode()
    row = Job.objects.get(id=job["id"])
    assert row.next_run_at <= row.updated_at


def test_activity_shows_runs_with_their_log_lines(owner):
    run_id = RunLog.call(
        owner.stable_user_id,
        "record",
        {
            "surface": "execute",
            "status": "success",
            "name": "accountUsage",
            "started_at": "2031-01-01T03:00:00+00:00",
            "finished_at": "2031-01-01T03:00:00.250000+00:00",
        },
        [{"level": "info", "message": "fetched the usage table"}],
    )
    client = browser(owner)
    assert "accountUsage" in client.get("/account/activity").content.decode()
    detail = client.get(f"/account/activity/{run_id}").content.decode()
    assert "fetched the usage table" in detail and "250 ms" in detail


def test_an_outsider_gets_404_and_changes_nothing(owner, outsider, job):
    run_id = RunLog.call(
        owner.stable_user_id,
        "record",
        {"surface": "job", "status": "success", "name": "x", "started_at": "2031-01-01T00:00Z"},
    )
    client = browser(outsider)
    assert client.get(f"/account/jobs/{job['id']}").status_code == 404
    assert client.get(f"/account/activity/{run_id}").status_code == 404
    assert client.post(f"/account/jobs/{job['id']}/pause").status_code == 404
    assert Job.objects.get(id=job["id"]).enabled is True
    assert "morning digest" not in client.get("/account/jobs").content.decode()
    assert run_id not in client.get("/account/activity").content.decode()


def test_pages_need_a_login(job):
    response = Client().get("/account/jobs")
    assert response.status_code == 302 and "/login" in response["Location"]
