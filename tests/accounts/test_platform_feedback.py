"""Platform feedback: the user approves the exact text (preview, then confirm) before it is
stored; operators read and triage it; another user sees nothing."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, PlatformFeedback
from apps.accounts.services.tokens import create_token
from kody.capabilities import all_capabilities
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

TEXT = {"category": "bug", "summary": "Search misses my package", "details": "SENTINEL details"}
ADMIN = {"adminPlatformFeedbackGet", "adminPlatformFeedbackList", "adminPlatformFeedbackUpdate"}


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def owner_raw(owner) -> str:
    return create_token(owner, "owner laptop")[1]


@pytest.fixture
def outsider_raw(outsider) -> str:
    return create_token(outsider, "outsider laptop")[1]


@pytest.fixture
def operator_raw(operator) -> str:
    return create_token(operator, "operator laptop")[1]


def _submit(raw: str) -> dict:
    preview = call(raw, "metaPlatformFeedbackSubmit", TEXT).json()
    done = call(
        raw, "metaPlatformFeedbackSubmit", {**TEXT, "confirmToken": preview["confirmToken"]}
    )
    assert done.status_code == 200, done.content
    return done.json()["feedback"]


def test_every_feedback_capability_is_covered_here():
    declared = {
        c.name
        for c in all_capabilities()
        if c.handler.__module__ == "apps.accounts.feedback_capabilities"
    }
    assert declared == ADMIN | {"metaPlatformFeedbackSubmit"}


def test_preview_stores_nothing_and_confirm_stores_once(owner, owner_raw):
    preview = call(owner_raw, "metaPlatformFeedbackSubmit", TEXT).json()
    assert preview["status"] == "preview" and preview["preview"]["summary"] == TEXT["summary"]
    assert not PlatformFeedback.objects.exists()
    confirmed = {**TEXT, "confirmToken": preview["confirmToken"]}
    first = call(owner_raw, "metaPlatformFeedbackSubmit", confirmed).json()
    again = call(owner_raw, "metaPlatformFeedbackSubmit", confirmed).json()
    assert first["status"] == "submitted" and first["feedback"]["id"] == again["feedback"]["id"]
    row = PlatformFeedback.objects.get()
    assert (row.submitter_user_id, row.status, row.details) == (
        owner.stable_user_id,
        "open",
        "SENTINEL details",
    )


def test_confirming_different_text_or_someone_elses_token_is_refused(owner_raw, outsider_raw):
    token = call(owner_raw, "metaPlatformFeedbackSubmit", TEXT).json()["confirmToken"]
    edited = {**TEXT, "details": "something the user never saw", "confirmToken": token}
    assert call(owner_raw, "metaPlatformFeedbackSubmit", edited).status_code == 409
    stolen = call(outsider_raw, "metaPlatformFeedbackSubmit", {**TEXT, "confirmToken": token})
    assert stolen.status_code == 409
    assert not PlatformFeedback.objects.exists()


@pytest.mark.parametrize(
    "bad",
    [
        {"summary": ""},
        {"summary": "x" * 201},
        {"details": "x" * 8001},
        {"details": "   "},
        {"category": "rant"},
    ],
)
def test_bounds_from_the_schema_are_coded_422s(bad, owner_raw):
    response = call(owner_raw, "metaPlatformFeedbackSubmit", {**TEXT, **bad})
    assert response.status_code == 422
    assert not PlatformFeedback.objects.exists()


def test_operator_lists_reads_and_triages_audit_first(owner_raw, operator, operator_raw):
    mine = _submit(owner_raw)
    listing = call(operator_raw, "adminPlatformFeedbackList", {"status": "open"}).json()
    assert [r["id"] for r in listing["feedback"]] == [mine["id"]]
    got = call(operator_raw, "adminPlatformFeedbackGet", {"id": mine["id"]}).json()
    assert got["summary"] == TEXT["summary"] and got["status"] == "open"
    assert set(got) >= {"submitterUserId", "submitterUsername"} and "submitterEmail" not in got

    triaged = call(
        operator_raw,
        "adminPlatformFeedbackUpdate",
        {"id": mine["id"], "status": "triaged", "note": "repro'd"},
    ).json()
    assert triaged["status"] == "triaged" and triaged["reviewedByUserId"] == operator.stable_user_id
    resolved = call(
        operator_raw, "adminPlatformFeedbackUpdate", {"id": mine["id"], "status": "resolved"}
    )
    assert resolved.json()["revision"] == 2
    back_to_open = call(
        operator_raw, "adminPlatformFeedbackUpdate", {"id": mine["id"], "status": "open"}
    )
    assert back_to_open.status_code == 409
    assert PlatformFeedback.objects.get().status == "resolved"
    actions = list(AuditEvent.objects.order_by("pk").values_list("action", flat=True))
    assert actions.index("adminPlatformFeedbackUpdate:intent") < actions.index(
        "adminPlatformFeedbackUpdate"
    )
    assert "adminPlatformFeedbackList" in actions and "adminPlatformFeedbackGet" in actions


@pytest.mark.parametrize("name", sorted(ADMIN))
def test_another_user_gets_403_and_sees_nothing(name, owner_raw, outsider_raw):
    mine = _submit(owner_raw)
    payload = {
        "adminPlatformFeedbackGet": {"id": mine["id"]},
        "adminPlatformFeedbackList": {},
        "adminPlatformFeedbackUpdate": {"id": mine["id"], "status": "dismissed"},
    }[name]
    response = call(outsider_raw, name, payload)
    assert response.status_code == 403
    assert "SENTINEL" not in response.content.decode()
    assert PlatformFeedback.objects.get().status == "open"
