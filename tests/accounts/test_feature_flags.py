"""Feature flags: one evaluation for code and templates, stable rollouts, overrides, the
experiments audience, exposure rollups, and the operator capabilities that change them."""

from __future__ import annotations

import hashlib

import pytest
from django.template import Context, Template
from django.test import RequestFactory
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, FeatureFlag, FeatureFlagExposureRollup
from apps.accounts.services import flags
from apps.accounts.services.tokens import create_token
from kody.capabilities import all_capabilities
from tests.accounts import factories as f
from tests.cast import bearer

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

ADMIN_FLAG_CAPABILITIES = {
    "adminFeatureFlagList",
    "adminFeatureFlagSet",
    "adminFeatureFlagOverride",
}


class Person:
    """Just what evaluation reads: a stable id and the experiments preference."""

    def __init__(self, n: int, opted_in: bool = False) -> None:
        self.stable_user_id = hashlib.sha256(f"person-{n}".encode()).hexdigest()
        self.experiments_opt_in = opted_in


def call(raw: str, name: str, payload: dict | None = None):  # type: ignore[no-untyped-def]
    return APIClient().post(
        f"/api/v1/capabilities/{name}", payload or {}, format="json", **bearer(raw)
    )


@pytest.fixture
def operator_raw(operator) -> str:
    return create_token(operator, "operator laptop")[1]


@pytest.fixture
def owner_raw(owner) -> str:
    return create_token(owner, "owner laptop")[1]


def test_rollout_is_stable_and_close_to_the_percentage_over_ten_thousand_ids():
    flag = FeatureFlag(key="new-editor", enabled=True, rollout_percent=30)
    people = [Person(n) for n in range(10_000)]
    first = [flags.decide(flag, p).enabled for p in people]
    again = [flags.decide(flag, p).enabled for p in people]
    assert first == again
    share = sum(first) / len(first)
    assert 0.28 <= share <= 0.32
    # Raising the percentage only adds people: nobody who had it loses it.
    wider = FeatureFlag(key="new-editor", enabled=True, rollout_percent=60)
    widened = [flags.decide(wider, p).enabled for p in people]
    assert all(w for was, w in zip(first, widened, strict=True) if was)
    assert 0.58 <= sum(widened) / len(widened) <= 0.62


def test_different_flags_pick_different_cohorts():
    a = FeatureFlag(key="a", enabled=True, rollout_percent=50)
    b = FeatureFlag(key="b", enabled=True, rollout_percent=50)
    people = [Person(n) for n in range(2_000)]
    same = sum(flags.decide(a, p).enabled == flags.decide(b, p).enabled for p in people)
    assert same < 1_200  # independent halves agree about half the time


def test_off_everyone_and_experiments_audience():
    outside = next(
        p for p in (Person(n) for n in range(100)) if flags.bucket("beta", p.stable_user_id) >= 10
    )
    partial = FeatureFlag(key="beta", enabled=True, rollout_percent=10)
    assert flags.decide(partial, outside).reason == "outside"
    outside.experiments_opt_in = True
    assert flags.decide(partial, outside) == flags.Decision(True, "experiments")
    assert not flags.decide(FeatureFlag(key="beta", enabled=False), outside).enabled
    assert flags.decide(None, outside).enabled is False
    assert flags.decide(FeatureFlag(key="beta", enabled=True), None).enabled is True
    assert flags.decide(partial, None).enabled is False


def test_override_wins_and_exposures_roll_up_per_day_value_and_source(owner, outsider):
    FeatureFlag.objects.create(key="beta", enabled=False)
    f.FeatureFlagUserOverrideFactory(flag_key="beta", user=owner, enabled=True)
    assert flags.is_enabled("beta", owner) is True
    assert flags.is_enabled("beta", owner) is True
    assert flags.is_enabled("beta", outsider) is False
    rows = {
        (r.user_id, r.enabled, r.source): r.exposure_count
        for r in FeatureFlagExposureRollup.objects.filter(flag_key="beta")
    }
    assert rows == {
        (owner.stable_user_id, True, "code"): 2,
        (outsider.stable_user_id, False, "code"): 1,
    }
    assert flags.readout("beta") == {
        "exposures": 3,
        "exposuresOn": 2,
        "exposuresOff": 1,
        "peopleOn": 1,
        "peopleOff": 1,
    }


def test_templates_use_the_same_helper(owner):
    FeatureFlag.objects.create(key="beta", enabled=True)
    request = RequestFactory().get("/")
    request.user = owner
    html = Template('{% load flags %}{% flag "beta" as on %}{% if on %}NEW{% else %}OLD{% endif %}')
    assert html.render(Context({"request": request})) == "NEW"
    row = FeatureFlagExposureRollup.objects.get(flag_key="beta")
    assert (row.user_id, row.source, row.enabled) == (owner.stable_user_id, "template", True)


def test_every_flag_capability_is_covered_here():
    declared = {
        c.name
        for c in all_capabilities()
        if c.handler.__module__ == "apps.accounts.flag_capabilities"
    }
    assert declared == ADMIN_FLAG_CAPABILITIES
    assert all(c.role == "admin" for c in all_capabilities() if c.name in declared)


def test_operator_sets_overrides_and_lists_flags_audit_first(operator_raw, outsider):
    response = call(
        operator_raw, "adminFeatureFlagSet", {"key": "beta", "enabled": True, "rolloutPercent": 0}
    )
    assert response.status_code == 200, response.content
    assert FeatureFlag.objects.get(key="beta").rollout_percent == 0
    assert not flags.is_enabled("beta", outsider)

    override = {"key": "beta", "userId": outsider.stable_user_id, "enabled": True}
    assert call(operator_raw, "adminFeatureFlagOverride", override).status_code == 200
    assert flags.is_enabled("beta", outsider)

    listing = call(operator_raw, "adminFeatureFlagList").json()
    # The product's own flags are seeded rows too; beta is the one this test made.
    (beta,) = [flag for flag in listing["flags"] if flag["key"] == "beta"]
    assert beta["key"] == "beta" and beta["overrides"] == 1
    assert beta["readout"]["exposuresOn"] == 1 and beta["readout"]["exposuresOff"] == 1

    actions = list(AuditEvent.objects.order_by("pk").values_list("action", "result"))
    for name in ("adminFeatureFlagSet", "adminFeatureFlagOverride"):
        intent = actions.index((f"{name}:intent", "success"))
        outcome = actions.index((name, "success"))
        assert intent < outcome
    assert ("adminFeatureFlagList", "success") in actions

    removed = {**override, "enabled": None}
    assert call(operator_raw, "adminFeatureFlagOverride", removed).json()["enabled"] is None
    assert not flags.is_enabled("beta", outsider)


def test_operator_gets_coded_errors_for_bad_input(operator_raw):
    bad = call(
        operator_raw, "adminFeatureFlagSet", {"key": "x", "enabled": True, "rolloutPercent": 101}
    )
    assert bad.status_code == 422
    missing = call(
        operator_raw,
        "adminFeatureFlagOverride",
        {"key": "nope", "userId": "f" * 64, "enabled": True},
    )
    assert missing.status_code == 404
    assert not FeatureFlag.objects.filter(key__in=["x", "nope"]).exists()


@pytest.mark.parametrize("name", sorted(ADMIN_FLAG_CAPABILITIES))
def test_a_user_gets_403_and_changes_nothing(name, owner_raw, outsider):
    FeatureFlag.objects.create(key="beta", enabled=False)
    payload = {
        "adminFeatureFlagList": {},
        "adminFeatureFlagSet": {"key": "beta", "enabled": True},
        "adminFeatureFlagOverride": {
            "key": "beta",
            "userId": outsider.stable_user_id,
            "enabled": True,
        },
    }[name]
    response = call(owner_raw, name, payload)
    assert response.status_code == 403
    assert "beta" not in response.content.decode()
    assert FeatureFlag.objects.get(key="beta").enabled is False
    assert not flags.is_enabled("beta", outsider)


def test_admin_flag_page_shows_the_readout(operator_client, owner):
    FeatureFlag.objects.create(key="beta", enabled=True)
    flags.is_enabled("beta", owner)
    page = operator_client.get("/admin/accounts/featureflag/").content.decode()
    assert "1 (1 on / 0 off; 1 / 0 people)" in page
