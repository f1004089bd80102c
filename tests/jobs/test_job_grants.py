"""Jobs run only as someone who still may.

A job replays the grant of the token that scheduled it. Revoke that token (or let it expire),
suspend the owner, and the job's next run does not happen — whether the scheduler's lane makes
it due or the owner asks for it with ``jobRunNow``: the run is recorded as skipped with the
reason, and the job is disabled with that reason in ``jobGet`` and on the account page.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import AccessToken, User
from apps.accounts.services.tokens import create_token, revoke_token
from apps.jobs.actor import RunLog
from apps.jobs.models import Job
from apps.packages.models import ValueEntry

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

EVERY_MINUTE = {"type": "cron", "expression": "* * * * *"}


def call(raw: str, name: str, payload: dict | None = None) -> tuple[int, dict]:
    response = APIClient().post(
        f"/api/v1/capabilities/{name}",
        payload or {},
        format="json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    return response.status_code, response.json()


def mark(name: str) -> dict:
    """A target with an effect anyone can check: the value ``name`` appears when it ran."""
    return {"capability": "valueSet", "args": {"name": name, "value": "the job ran"}}


def schedule(raw: str, target: dict, schedule: dict = EVERY_MINUTE) -> str:
    status, body = call(
        raw, "jobSchedule", {"name": "probe", "target": target, "schedule": schedule}
    )
    assert status == 200, body
    return body["id"]


def ran(user: User, name: str) -> bool:
    return ValueEntry.objects.filter(bucket__user_id=user.stable_user_id, name=name).exists()


def job_runs(user: User, job_id: str) -> list[dict]:
    page = RunLog.call(user.stable_user_id, "list_runs", {"job_id": job_id}, None, 500)
    return [r for r in page["runs"] if r["surface"] == "job"]


def next_minute(clock, job_id: str) -> None:  # type: ignore[no-untyped-def]
    clock.move_to(Job.objects.get(id=job_id).next_run_at + timedelta(seconds=5))


def assert_skipped(user: User, job_id: str, reason: str) -> None:
    last = job_runs(user, job_id)[0]
    assert last["errorName"] == "skipped" and last["status"] == "error"
    assert last["metadata"]["skipped"] == reason
    row = Job.objects.get(id=job_id)
    assert row.enabled is False and row.disabled_reason == reason
    assert row.last_run_status == "skipped" and row.claim_token is None


def test_a_revoked_token_stops_its_job_at_the_next_tick(owner, clock, wake):
    token, raw = create_token(owner, "laptop")
    other = create_token(owner, "phone")[1]
    job_id = schedule(raw, mark("tick"))
    next_minute(clock, job_id)
    wake()
    assert ran(owner, "tick")  # the job works while its token is live
    ValueEntry.objects.filter(name="tick").delete()

    revoke_token(owner, token.pk)
    next_minute(clock, job_id)
    wake()

    assert not ran(owner, "tick")
    assert_skipped(owner, job_id, "token_revoked")
    status, job = call(other, "jobGet", {"jobId": job_id})
    assert status == 200
    assert (job["status"], job["enabled"], job["disabledReason"]) == (
        "disabled",
        False,
        "token_revoked",
    )
    assert "revoked" in job["disabledBecause"]
    _, listed = call(other, "jobList")
    assert [j["status"] for j in listed["jobs"]] == ["disabled"]
    # Nothing more runs: a disabled job is not due.
    clock.shift(timedelta(minutes=5))
    wake()
    assert len(job_runs(owner, job_id)) == 2 and not ran(owner, "tick")


def test_job_run_now_of_a_job_whose_token_was_revoked_is_skipped_too(owner, clock, wake):
    token, raw = create_token(owner, "script")
    other = create_token(owner, "laptop")[1]
    later = (timezone.now() + timedelta(days=30)).isoformat()
    status, body = call(
        raw, "jobScheduleOnce", {"name": "once", "target": mark("now"), "runAt": later}
    )
    assert status == 200, body
    job_id = body["id"]
    revoke_token(owner, token.pk)

    status, queued = call(other, "jobRunNow", {"jobId": job_id})
    assert status == 200 and queued["queued"] is True
    wake()

    assert not ran(owner, "now")
    assert_skipped(owner, job_id, "token_revoked")
    assert call(other, "jobGet", {"jobId": job_id})[1]["disabledReason"] == "token_revoked"


def test_an_expired_token_stops_its_job(owner, clock, wake):
    token, raw = create_token(owner, "short-lived")
    job_id = schedule(raw, mark("expired"))
    AccessToken.objects.filter(pk=token.pk).update(expires_at=timezone.now())
    next_minute(clock, job_id)
    wake()
    assert not ran(owner, "expired")
    assert_skipped(owner, job_id, "token_expired")


def test_the_account_page_shows_the_job_disabled_and_why(owner, owner_client, clock, wake):
    token, raw = create_token(owner, "laptop")
    job_id = schedule(raw, mark("page"))
    revoke_token(owner, token.pk)
    next_minute(clock, job_id)
    wake()
    page = owner_client.get(f"/account/jobs/{job_id}").content.decode()
    assert "disabled" in page and "was revoked" in page
    listing = owner_client.get("/account/jobs").content.decode()
    assert "disabled: The access token that scheduled this job was revoked." in listing


def test_re_enabling_with_a_live_token_runs_the_job_as_that_token(owner, clock, wake):
    token, raw = create_token(owner, "old")
    fresh_token, fresh = create_token(owner, "new")
    job_id = schedule(raw, mark("again"))
    revoke_token(owner, token.pk)
    next_minute(clock, job_id)
    wake()
    assert_skipped(owner, job_id, "token_revoked")

    status, job = call(fresh, "jobUpdate", {"jobId": job_id, "enabled": True})
    assert status == 200 and job["status"] == "active" and job["disabledReason"] is None
    assert Job.objects.get(id=job_id).caller_context_json["tokenId"] == fresh_token.pk
    next_minute(clock, job_id)
    wake()
    assert ran(owner, "again")


def test_a_suspended_owners_job_does_not_send_mail(owner, clock, wake, settings):
    settings.KODY_MAIL_DOMAIN = "mail.kody.test"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    raw = create_token(owner, "mailer")[1]
    send = {
        "capability": "emailSend",
        "args": {"to": ["bob@example.org"], "subject": "Daily", "text": "report"},
    }
    job_id = schedule(raw, send)
    User.objects.filter(pk=owner.pk).update(suspended_at=timezone.now())
    next_minute(clock, job_id)
    wake()
    assert mail.outbox == []
    assert_skipped(owner, job_id, "owner_suspended")


def test_someone_elses_revoked_token_does_not_touch_the_owners_job(owner, outsider, clock, wake):
    raw = create_token(owner, "laptop")[1]
    theirs = create_token(outsider, "laptop")[0]
    job_id = schedule(raw, mark("mine"))
    revoke_token(outsider, theirs.pk)
    next_minute(clock, job_id)
    wake()
    assert ran(owner, "mine")
    row = Job.objects.get(id=job_id)
    assert row.enabled and row.disabled_reason is None
    # And the outsider cannot read the owner's job, disabled or not.
    outsider_raw = create_token(outsider, "other")[1]
    assert call(outsider_raw, "jobGet", {"jobId": job_id})[0] == 404


def test_jobs_written_before_token_ids_are_checked_through_their_principal(owner):
    """Rows from before ``tokenId``: a PAT's job names it ``pat:{id}``, an OAuth client's job
    names the client, and a session's job names its surface and owner."""
    from apps.accounts.models import TokenKind
    from apps.jobs import grants
    from tests.accounts.factories import AccessTokenFactory

    uid = owner.stable_user_id
    pat = AccessTokenFactory(user=owner)
    oauth = AccessTokenFactory(user=owner, kind=TokenKind.OAUTH, client_id="client-notes")

    def refusal(principal: str, surface: str = "api") -> str | None:
        context = {"userId": uid, "surface": surface, "scopes": ["*"], "principal": principal}
        return grants.refusal(context, User.objects.get(pk=owner.pk))

    assert refusal(f"pat:{pat.pk}") is None
    assert refusal("client-notes", "mcp") is None
    assert refusal(f"ui:{uid}", "ui") is None and refusal(f"api:{uid}", "job") is None
    AccessToken.objects.filter(pk=pat.pk).update(revoked_at=timezone.now())
    AccessToken.objects.filter(pk=oauth.pk).update(revoked_at=timezone.now())
    assert refusal(f"pat:{pat.pk}") == "token_revoked"
    assert refusal("client-notes", "mcp") == "token_revoked"
    assert refusal(f"ui:{uid}", "ui") is None  # the owner's own session needs no token
    AccessToken.objects.filter(pk=pat.pk).delete()
    assert refusal(f"pat:{pat.pk}") == "token_missing"
