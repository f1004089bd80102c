"""Package exports run from their published bundle: pinned ``kody:@`` imports, package
storage id, run records — and over HTTP with an invocation token, replayed by key."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from apps.entitlements.actor import UserMeter
from apps.entitlements.services.enforcement import utc_day
from apps.jobs.services import runs

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

# The sandbox's ``kody`` global, declared for the publish type check.
DECLARE = (
    "type Call = (args: Record<string, unknown>) => Promise<{ value: { value: string } }>;\n"
    "declare const kody: Record<string, Call>;\n"
)
COUNTER = """
export default async function (args: { by?: number }) {
  let n = 0;
  try { n = Number((await kody.valueGet({ name: "hits" })).value.value); } catch { n = 0; }
  n += args.by ?? 1;
  await kody.valueSet({ name: "hits", value: String(n) });
  return { hits: n };
}
"""


def package_files(name: str, modules: dict[str, str], exports: dict[str, str]) -> dict:
    return {
        "package.json": json.dumps(
            {
                "name": f"@ada/{name}",
                "exports": exports,
                "kody": {"description": f"The {name} package.", "tags": ["examples"]},
            }
        ),
        "README.md": f"# {name}\n",
        **modules,
    }


def publish(agent, name: str, modules: dict[str, str], exports: dict[str, str]) -> dict:
    files = package_files(name, modules, exports)
    return agent.call("packageSave", files=files)["package"]


@pytest.fixture
def counter(as_owner):
    shout = "export default (a: { s: string }) => a.s.toUpperCase();\n"
    return publish(
        as_owner,
        "counter",
        {"mod.ts": DECLARE + COUNTER, "shout.ts": shout},
        {".": "./mod.ts", "./shout": "./shout.ts"},
    )


def invoke(package_id, export, raw, body=None, key=None):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    if key:
        headers["HTTP_IDEMPOTENCY_KEY"] = key
    return APIClient().post(
        f"/api/v1/packages/{package_id}/exports/{export}",
        json.dumps(body or {}),
        content_type="application/json",
        **headers,
    )


def charged(user) -> int:
    row = UserMeter.call(
        user.stable_user_id, "read", resource="execute_calls_per_day", day=utc_day()
    )
    return int(row["count"])


def test_a_token_runs_an_export_as_the_owner_and_records_the_run(as_owner, owner, counter):
    minted = as_owner.call("packageInvocationTokenCreate", packageId=counter["id"], name="ci")
    raw = minted["secret"]
    assert "tokenHash" not in minted["token"] and raw not in json.dumps(minted["token"])
    reply = invoke(counter["id"], "default", raw, {"by": 2})
    assert reply.status_code == 200, reply.content
    assert reply.json()["result"] == {"hits": 2}
    assert as_owner.call("valueGet", name="hits")["value"]["value"] == "2"
    shout = invoke(counter["id"], "shout", raw, {"s": "hey"})
    assert shout.json()["result"] == "HEY"
    exported = runs.list_runs(owner.stable_user_id, surface="export")["runs"]
    assert {r["name"] for r in exported} == {"@ada/counter#default", "@ada/counter#shout"}
    assert all(r["storageId"] == f"package:{counter['id']}" for r in exported)
    # The secret is never shown again.
    listed = as_owner.call("packageInvocationTokenList", packageId=counter["id"])
    assert raw not in json.dumps(listed)


def test_the_same_idempotency_key_replays_the_result_and_runs_once(as_owner, owner, counter):
    raw = as_owner.call("packageInvocationTokenCreate", packageId=counter["id"], name="ci")[
        "secret"
    ]
    before = charged(owner)
    first = invoke(counter["id"], "default", raw, {"by": 1}, key="order-17")
    again = invoke(counter["id"], "default", raw, {"by": 1}, key="order-17")
    assert first.status_code == again.status_code == 200
    assert first.json()["result"] == again.json()["result"] == {"hits": 1}
    assert again["Idempotent-Replayed"] == "true"
    assert as_owner.call("valueGet", name="hits")["value"]["value"] == "1"  # ran once
    assert charged(owner) == before + 1
    reused = invoke(counter["id"], "default", raw, {"by": 5}, key="order-17")
    assert reused.status_code == 409
    other = invoke(counter["id"], "default", raw, {"by": 1}, key="order-18")
    assert other.json()["result"] == {"hits": 2}


def test_a_token_for_another_package_or_export_runs_nothing(as_owner, counter):
    other = publish(
        as_owner, "other", {"mod.ts": "export default () => 'other';\n"}, {".": "./mod.ts"}
    )
    raw = as_owner.call("packageInvocationTokenCreate", packageId=other["id"], name="x")["secret"]
    refused = invoke(counter["id"], "default", raw)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "invocation_token_not_allowed"
    only_shout = as_owner.call(
        "packageInvocationTokenCreate", packageId=counter["id"], name="s", exportNames=["shout"]
    )["secret"]
    assert invoke(counter["id"], "default", only_shout).status_code == 403
    assert invoke(counter["id"], "shout", only_shout, {"s": "a"}).json()["result"] == "A"
    as_owner.error("valueGet", 404, name="hits")  # the counter never ran


def test_a_revoked_or_unknown_token_runs_nothing(as_owner, counter):
    minted = as_owner.call("packageInvocationTokenCreate", packageId=counter["id"], name="ci")
    revoked = as_owner.call("packageInvocationTokenRevoke", tokenId=minted["token"]["id"])
    assert revoked["token"]["revokedAt"] is not None
    reply = invoke(counter["id"], "default", minted["secret"])
    assert reply.status_code == 401
    assert reply.json()["error"]["code"] == "invocation_token_revoked"
    assert invoke(counter["id"], "default", "kpi_made-up").status_code == 401
    as_owner.error("valueGet", 404, name="hits")


def test_an_outsider_cannot_mint_or_revoke_tokens_for_the_owners_package(
    as_owner, as_outsider, counter
):
    as_outsider.error("packageInvocationTokenCreate", 404, packageId=counter["id"], name="x")
    minted = as_owner.call("packageInvocationTokenCreate", packageId=counter["id"], name="ci")
    as_outsider.error("packageInvocationTokenRevoke", 404, tokenId=minted["token"]["id"])
    assert invoke(counter["id"], "shout", minted["secret"], {"s": "ok"}).status_code == 200


def test_a_kody_import_is_pinned_at_publish(as_owner):
    publish(as_owner, "util", {"mod.ts": "export const word = 'first';\n"}, {".": "./mod.ts"})
    user = publish(
        as_owner,
        "user",
        {"mod.ts": 'import { word } from "kody:@ada/util";\nexport default () => word;\n'},
        {".": "./mod.ts"},
    )
    util = as_owner.call("packageGet", name="@ada/util")["package"]
    as_owner.call(
        "packageSave",
        packageId=util["id"],
        files=package_files(
            "util", {"mod.ts": "export const word = 'second';\n"}, {".": "./mod.ts"}
        ),
    )
    raw = as_owner.call("packageInvocationTokenCreate", packageId=user["id"], name="t")["secret"]
    assert invoke(user["id"], "default", raw).json()["result"] == "first"
