"""Live invocation tokens are counted per person against the plan's limit
(``KODY_INVOCATION_TOKEN_LIMITS``): one more answers 429 ``invocation_token_limit`` and
stores nothing; revoking frees a place; another person's tokens never count."""

from __future__ import annotations

import json

import pytest

from apps.packages.models import PackageInvocationToken

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def package(agent, name: str) -> dict:
    files = {
        "package.json": json.dumps(
            {
                "name": f"@{agent.user.username.lower()}/{name}",
                "exports": {".": "./mod.ts"},
                "kody": {"description": "A package.", "tags": ["examples"]},
            }
        ),
        "README.md": f"# {name}\n",
        "mod.ts": "export default () => 1;\n",
    }
    return agent.call("packageSave", files=files)["package"]


@pytest.fixture
def small_limit(settings):
    settings.KODY_INVOCATION_TOKEN_LIMITS = {"free": 2, "standard": 3, "pro": 3, "max": 3}


def test_the_token_past_the_plan_limit_is_refused_and_revoking_frees_a_place(
    as_owner, owner, small_limit
):
    pkg = package(as_owner, "tool")
    first = as_owner.call("packageInvocationTokenCreate", packageId=pkg["id"], name="a")
    as_owner.call("packageInvocationTokenCreate", packageId=pkg["id"], name="b")
    error = as_owner.error("packageInvocationTokenCreate", 429, packageId=pkg["id"], name="c")
    assert error["code"] == "invocation_token_limit"
    assert error["details"] == {"limit": 2, "used": 2}
    names = set(
        PackageInvocationToken.objects.filter(user_id=owner.stable_user_id).values_list(
            "name", flat=True
        )
    )
    assert names == {"a", "b"}  # nothing was stored for the refused one
    as_owner.call("packageInvocationTokenRevoke", tokenId=first["token"]["id"])
    again = as_owner.call("packageInvocationTokenCreate", packageId=pkg["id"], name="c")
    assert again["secret"].startswith("kpi_")


def test_another_persons_tokens_do_not_count(as_owner, as_outsider, small_limit):
    mine = package(as_owner, "tool")
    for name in ("a", "b"):
        as_owner.call("packageInvocationTokenCreate", packageId=mine["id"], name=name)
    theirs = package(as_outsider, "tool")
    for name in ("a", "b"):
        as_outsider.call("packageInvocationTokenCreate", packageId=theirs["id"], name=name)
    as_outsider.error("packageInvocationTokenCreate", 429, packageId=theirs["id"], name="c")
    listed = as_outsider.call("packageInvocationTokenList", packageId=theirs["id"])
    assert len(listed["tokens"]) == 2
