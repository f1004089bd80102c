"""The admin index is the operator's console: health first, counts needing attention, the
tasks, and the raw per-app tables one level down."""

from __future__ import annotations

import pytest

from apps.accounts import models as acc
from apps.community.models import CommunityReport, ReportStatus
from kody.lanes.models import LaneRunRecord
from tests.accounts import factories as f

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def _report(status: str = ReportStatus.OPEN) -> CommunityReport:
    return CommunityReport.objects.create(
        listing_id="listing-1",
        listing_owner_user_id="a" * 64,
        reporter_user_id="b" * 64,
        reason="SENTINEL report body",
        status=status,
    )


def _attention(page: str, key: str) -> str:
    start = page.index(f'id="attention-{key}"')
    return page[start : page.index("</tr>", start)]


def test_the_console_leads_with_health_then_attention_then_tasks(operator_client):
    page = operator_client.get("/admin/").content.decode()
    order = [
        page.index('id="kody-health-link"'),
        page.index('id="kody-attention"'),
        page.index('id="task-people"'),
        page.index('id="task-moderation"'),
        page.index('id="task-mail"'),
        page.index('id="task-billing"'),
        page.index('id="task-platform"'),
        page.index('id="kody-tables-link"'),
    ]
    assert order == sorted(order)
    assert "/admin/health/" in page
    # The stock alphabetical app list is gone from the index …
    assert 'class="app-packages module' not in page
    assert "Vector embed fingerprints" not in page


def test_raw_tables_are_one_level_down(operator_client):
    page = operator_client.get("/admin/tables/").content.decode()
    assert 'class="app-packages module' in page
    assert "Vector embed fingerprints" in page


def test_tasks_link_to_the_models_operators_use(operator_client):
    page = operator_client.get("/admin/").content.decode()
    people = page[page.index('id="task-people"') : page.index('id="task-moderation"')]
    assert "/admin/accounts/user/" in people
    assert "/admin/accounts/user/?suspended_at__isnull=False" in people
    assert "/admin/accounts/accountdeletion/" in people
    moderation = page[page.index('id="task-moderation"') : page.index('id="task-mail"')]
    assert "/admin/community/communityreport/" in moderation
    assert "/admin/community/communityban/" in moderation
    assert "/admin/accounts/platformfeedback/" in moderation
    platform = page[page.index('id="task-platform"') : page.index('id="kody-tables-link"')]
    for url in ("featureflag", "sitebanner", "platformoauthapp", "lanecontrol"):
        assert f"/{url}/" in platform
    # Every task link opens.
    assert (
        operator_client.get("/admin/accounts/user/?suspended_at__isnull=False").status_code == 200
    )


def test_counts_needing_attention_show_on_the_index(operator_client):
    _report()
    _report()
    _report(ReportStatus.RESOLVED)
    f.AccountDeletionFactory(status=acc.DeletionStatus.RETAINED)
    f.AccountDeletionFactory(status=acc.DeletionStatus.RUNNING)  # fresh: still working
    f.PlatformFeedbackFactory()
    LaneRunRecord.objects.create(lane="zz_broken_lane", consecutive_failures=3)
    LaneRunRecord.objects.create(lane="zz_fine_lane", consecutive_failures=0)

    page = operator_client.get("/admin/").content.decode()
    assert "<strong>2</strong>" in _attention(page, "open_reports")
    assert "<strong>1</strong>" in _attention(page, "stuck_deletions")
    assert "<strong>1</strong>" in _attention(page, "open_feedback")
    assert "<strong>1</strong>" in _attention(page, "failed_lanes")
    # Counts only: the console never shows what a report says.
    assert "SENTINEL report body" not in page


def test_a_running_deletion_nobody_touched_for_an_hour_is_stuck(frozen_clock, operator_client):
    from datetime import timedelta

    from django.utils import timezone

    f.AccountDeletionFactory(
        status=acc.DeletionStatus.RUNNING, updated_at=timezone.now() - timedelta(hours=2)
    )
    f.AccountDeletionFactory(status=acc.DeletionStatus.RUNNING, updated_at=timezone.now())
    page = operator_client.get("/admin/").content.decode()
    assert "<strong>1</strong>" in _attention(page, "stuck_deletions")


def test_the_console_is_for_staff_only(owner_client):
    for url in ("/admin/", "/admin/tables/"):
        response = owner_client.get(url)
        assert response.status_code == 302 and "/admin/login/" in response["Location"]
