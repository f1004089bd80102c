"""A person's own time zone: chosen on /account/settings, then every date their pages show reads
in it; someone else's pages keep theirs. The clock is pinned so the dates are known."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.test import Client

from apps.accounts.models import User
from apps.accounts.services.tokens import create_token
from apps.accounts.time_zones import choices

pytestmark = pytest.mark.django_db(databases=["default", "audit"])
PINNED = datetime(2026, 12, 4, 23, 30, tzinfo=UTC)


@pytest.fixture
def pinned(frozen_clock: Any) -> None:
    frozen_clock.move_to(PINNED)


def test_settings_offer_every_zone_with_utc_first(owner_client: Client) -> None:
    page = owner_client.get("/account/settings").content.decode()
    assert '<option value="UTC" selected>' in page
    assert '<option value="Europe/Paris">' in page
    assert choices()[0] == "UTC" and len(choices()) > 300


def test_dates_follow_the_chosen_zone(pinned: None, owner: User, owner_client: Client) -> None:
    create_token(owner, "laptop")
    assert "4 Dec 2026, 23:30 UTC" in owner_client.get("/account/connections").content.decode()

    saved = owner_client.post("/account/settings/time-zone", {"time_zone": "Europe/Paris"})
    assert saved.status_code == 302
    owner.refresh_from_db()
    assert owner.time_zone == "Europe/Paris"
    page = owner_client.get("/account/connections").content.decode()
    assert "5 Dec 2026, 00:30 CET" in page and "23:30 UTC" not in page
    assert (
        '<option value="Europe/Paris" selected>'
        in owner_client.get("/account/settings").content.decode()
    )

    # Back to UTC: stored as no zone at all.
    owner_client.post("/account/settings/time-zone", {"time_zone": "UTC"})
    owner.refresh_from_db()
    assert owner.time_zone == ""
    assert "4 Dec 2026, 23:30 UTC" in owner_client.get("/account/connections").content.decode()


def test_an_unknown_zone_is_refused_and_nothing_changes(owner: User, owner_client: Client) -> None:
    for bad in ("Mars/Olympus", "", "../../etc/passwd", "x" * 500, "Etc/GMT+5"):
        response = owner_client.post("/account/settings/time-zone", {"time_zone": bad})
        assert response.status_code == 422, bad
    owner.refresh_from_db()
    assert owner.time_zone == ""


def test_one_persons_zone_leaves_anothers_pages_alone(
    pinned: None,
    owner: User,
    outsider: User,
    owner_client: Client,
    outsider_client: Client,
) -> None:
    create_token(outsider, "desk")
    owner_client.post("/account/settings/time-zone", {"time_zone": "Asia/Tokyo"})
    page = outsider_client.get("/account/connections").content.decode()
    assert "4 Dec 2026, 23:30 UTC" in page and "JST" not in page
    outsider.refresh_from_db()
    assert outsider.time_zone == ""
    # Signed out, the settings endpoint changes nothing.
    assert (
        Client().post("/account/settings/time-zone", {"time_zone": "Asia/Tokyo"}).status_code == 302
    )
    outsider.refresh_from_db()
    assert outsider.time_zone == ""


def test_the_column_refuses_a_zone_the_tz_database_does_not_know() -> None:
    # An imported account's row goes through the field's validators (export/importer.py).
    field = User._meta.get_field("time_zone")
    field.run_validators("Europe/Paris")
    field.run_validators("")
    with pytest.raises(ValidationError):
        field.run_validators("Mars/Olympus")
