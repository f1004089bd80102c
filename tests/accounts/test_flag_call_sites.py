"""The product reads its feature flags: the account home's next-step card is gated in code
(``home.next_step``) and its experiments hint in the template (``{% flag %}``). Both flags are
seeded off; off, the element is absent; on — for everyone or for one person by override — it
renders, and each evaluation lands in that person's (flag, day, enabled, source) rollup."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from apps.accounts.home import NEXT_STEP_FLAG
from apps.accounts.models import FeatureFlag, FeatureFlagExposureRollup, User
from apps.accounts.services import flags
from tests.accounts import factories as f
from tests.clock import FROZEN_AT
from tests.packages.factories import SavedPackageFactory

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

HINT_FLAG = "account_experiments_hint"
CARD = 'data-testid="next-step"'
HINT = 'data-testid="experiments-hint"'


@pytest.fixture(autouse=True)
def _pinned(frozen_clock: object) -> None:
    """Exposure rows are per day: the clock is pinned so the day is known."""


def home(client: Client) -> str:
    response = client.get("/account")
    assert response.status_code == 200
    return response.content.decode()


def exposures(user: User) -> dict[tuple[str, bool, str], int]:
    rows = FeatureFlagExposureRollup.objects.filter(user_id=user.stable_user_id)
    assert all(r.day == FROZEN_AT.date() for r in rows)
    return {(r.flag_key, r.enabled, r.source): r.exposure_count for r in rows}


def test_both_flags_are_seeded_off() -> None:
    seeded = {k.key: k for k in FeatureFlag.objects.filter(key__in=[NEXT_STEP_FLAG, HINT_FLAG])}
    assert set(seeded) == {NEXT_STEP_FLAG, HINT_FLAG}
    assert not any(flag.enabled for flag in seeded.values())
    assert all(flag.note for flag in seeded.values())


def test_off_nothing_renders_and_the_control_exposure_is_counted(
    owner: User, owner_client: Client
) -> None:
    page = home(owner_client)
    assert CARD not in page and HINT not in page
    # The older hint still shows for someone with no agent while the card is off.
    assert 'data-testid="agent-count"' in page
    assert exposures(owner) == {
        (NEXT_STEP_FLAG, False, "code"): 1,
        (HINT_FLAG, False, "template"): 1,
    }
    assert flags.readout(NEXT_STEP_FLAG)["exposuresOff"] == 1


def test_an_override_shows_them_to_that_person_only(
    owner: User, outsider: User, owner_client: Client, outsider_client: Client
) -> None:
    for key in (NEXT_STEP_FLAG, HINT_FLAG):
        f.FeatureFlagUserOverrideFactory(flag_key=key, user=owner, enabled=True)
    page = home(owner_client)
    assert CARD in page and "Next step: Connect your first agent" in page
    assert 'data-testid="agent-count"' not in page  # the card replaces the older hint
    assert HINT in page and 'href="/account/experiments"' in page
    assert exposures(owner) == {
        (NEXT_STEP_FLAG, True, "code"): 1,
        (HINT_FLAG, True, "template"): 1,
    }
    other = home(outsider_client)
    assert CARD not in other and HINT not in other
    assert exposures(outsider) == {
        (NEXT_STEP_FLAG, False, "code"): 1,
        (HINT_FLAG, False, "template"): 1,
    }
    home(owner_client)
    assert exposures(owner)[(NEXT_STEP_FLAG, True, "code")] == 2


def test_the_card_follows_the_onboarding_steps(owner: User, owner_client: Client) -> None:
    FeatureFlag.objects.filter(key=NEXT_STEP_FLAG).update(enabled=True)
    assert "Next step: Connect your first agent" in home(owner_client)
    User.objects.filter(pk=owner.pk).update(first_mcp_connected_at=timezone.now())
    assert "Next step: Save your first package" in home(owner_client)
    SavedPackageFactory(user_id=owner.stable_user_id, kody_id="@ada/w", source_id="s-ada")
    assert "Next step: Use your packages from a second agent" in home(owner_client)
    User.objects.filter(pk=owner.pk).update(second_agent_standard_gift_granted_at=timezone.now())
    assert CARD not in home(owner_client)  # activated: no step left


def test_the_hint_is_for_people_not_yet_in_experiments(owner: User, owner_client: Client) -> None:
    FeatureFlag.objects.filter(key=HINT_FLAG).update(enabled=True)
    assert HINT in home(owner_client)
    User.objects.filter(pk=owner.pk).update(experiments_opt_in=True)
    assert HINT not in home(owner_client)
    assert exposures(owner)[(HINT_FLAG, True, "template")] == 2


def test_a_removed_flag_row_is_off_and_counts_nothing(owner: User, owner_client: Client) -> None:
    FeatureFlag.objects.filter(key__in=[NEXT_STEP_FLAG, HINT_FLAG]).delete()
    page = home(owner_client)
    assert CARD not in page and HINT not in page
    assert exposures(owner) == {}
