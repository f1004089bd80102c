"""Webhooks: a minted URL runs the package's declared export once per delivery; a wrong
secret, a rotated-away URL or a disabled endpoint answers 404 and runs nothing."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from apps.packages.models import WebhookEndpoint
from tests.packages.test_package_exports import DECLARE, package_files

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

HANDLER = (
    DECLARE
    + "export default async (args: { json: { n: number } }) => {\n"
    + "  let seen = '';\n"
    + "  try { seen = (await kody.valueGet({ name: 'deliveries' })).value.value; }\n"
    + "  catch { seen = ''; }\n"
    + "  await kody.valueSet({ name: 'deliveries', value: seen + args.json.n + ';' });\n"
    + "  return 'ok';\n};\n"
)


@pytest.fixture
def hooked(as_owner):
    files = package_files("hooks", {"mod.ts": HANDLER}, {".": "./mod.ts"})
    manifest = json.loads(files["package.json"])
    manifest["kody"]["webhooks"] = {"push": {"export": "default"}}
    files["package.json"] = json.dumps(manifest)
    return as_owner.call("packageSave", files=files)["package"]


def post(url: str, n: int):
    return Client().post(url, json.dumps({"n": n}), content_type="application/json")


def delivered(agent) -> str:
    reply = agent.raw("valueGet", name="deliveries")
    return reply.json()["value"]["value"] if reply.status_code == 200 else ""


def test_a_valid_delivery_runs_the_export_once_and_is_recorded(as_owner, owner, hooked):
    minted = as_owner.call("webhookUrlMint", packageId=hooked["id"], name="push")
    url = minted["url"]
    assert url.startswith("/@ada/webhooks/hooks/push/")
    assert post(url, 1).status_code == 200
    assert delivered(as_owner) == "1;"
    [run] = as_owner.call("webhookDeliveryList", packageId=hooked["id"])["deliveries"]
    assert run["surface"] == "webhook" and run["status"] == "success"
    secret = url.rsplit("/", 1)[-1]
    row = WebhookEndpoint.objects.get(package_id=hooked["id"])
    assert secret not in (row.url_secret_hash + row.url_secret_encrypted)
    listed = as_owner.call("webhookList", packageId=hooked["id"])
    assert secret not in json.dumps(listed) and listed["webhooks"][0]["minted"] is True
    as_owner.error("webhookUrlMint", 422, packageId=hooked["id"], name="push")


def test_wrong_secret_rotated_url_and_disabled_endpoint_run_nothing(as_owner, hooked):
    old = as_owner.call("webhookUrlMint", packageId=hooked["id"], name="push")["url"]
    assert post(old[:-4] + "abcd", 1).status_code == 404
    assert post(old.replace("/push/", "/other/"), 1).status_code == 404
    assert post(old.replace("/@ada/", "/@nobody/"), 1).status_code == 404

    new = as_owner.call("webhookUrlRotate", packageId=hooked["id"], name="push")["url"]
    assert new != old
    assert post(old, 2).status_code == 404
    assert delivered(as_owner) == ""

    as_owner.call("webhookDisable", packageId=hooked["id"], name="push")
    assert post(new, 3).status_code == 404
    assert delivered(as_owner) == ""
    as_owner.call("webhookEnable", packageId=hooked["id"], name="push")
    assert post(new, 4).status_code == 200
    assert delivered(as_owner) == "4;"


def test_only_declared_webhooks_mint_and_only_for_the_owner(as_owner, as_outsider, hooked):
    as_owner.error("webhookUrlMint", 404, packageId=hooked["id"], name="undeclared")
    as_outsider.error("webhookUrlMint", 404, packageId=hooked["id"], name="push")
    as_owner.call("webhookUrlMint", packageId=hooked["id"], name="push")
    as_outsider.error("webhookDisable", 404, packageId=hooked["id"], name="push")
    assert as_outsider.call("webhookList")["webhooks"] == []
    assert as_outsider.call("webhookDeliveryList")["deliveries"] == []


def test_an_oversized_delivery_is_refused_unrun(as_owner, hooked):
    url = as_owner.call("webhookUrlMint", packageId=hooked["id"], name="push")["url"]
    body = json.dumps({"n": 1, "pad": "x" * 300_000})
    reply = Client().post(url, body, content_type="application/json")
    assert reply.status_code == 413
    assert delivered(as_owner) == ""
