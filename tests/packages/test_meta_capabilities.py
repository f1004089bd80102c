"""metaGet/SetMcpServerInstructions and metaListCapabilities, owner and outsider."""

from __future__ import annotations

import pytest

from apps.accounts.services.tokens import create_token
from apps.packages.models import McpUserServerInstructions
from apps.packages.services.mcp_instructions import MAX_CHARS
from kody.capabilities import Context, invoke

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_owner_sets_reads_and_clears_instructions(as_owner, as_outsider, owner):
    assert as_owner.call("metaGetMcpServerInstructions") == {"instructions": ""}
    saved = as_owner.call("metaSetMcpServerInstructions", instructions="  Reply in Portuguese. ")
    assert saved == {"instructions": "Reply in Portuguese."}
    assert as_owner.call("metaGetMcpServerInstructions")["instructions"] == "Reply in Portuguese."
    assert McpUserServerInstructions.objects.get(user_id=owner.stable_user_id)

    assert as_outsider.call("metaGetMcpServerInstructions") == {"instructions": ""}

    as_owner.call("metaSetMcpServerInstructions", instructions="")
    assert not McpUserServerInstructions.objects.filter(user_id=owner.stable_user_id).exists()


def test_instructions_are_bounded(as_owner, owner):
    as_owner.error("metaSetMcpServerInstructions", 422, instructions="x" * (MAX_CHARS + 1))
    assert not McpUserServerInstructions.objects.filter(user_id=owner.stable_user_id).exists()


def test_list_capabilities_follows_the_tokens_scopes(owner):
    token, _ = create_token(owner, "narrow")
    token.scopes = ["meta", "values"]
    token.save(update_fields=["scopes"])
    listed = invoke("metaListCapabilities", Context(user=owner, token=token))
    domains = {entry["domain"]: entry["capabilities"] for entry in listed["domains"]}
    assert set(domains) == {"meta", "values"}
    assert {"name": "valueSet", "title": "Save a value", "mutates": True} in domains["values"]

    full = invoke("metaListCapabilities", Context(user=owner, token=create_token(owner, "all")[0]))
    names = {cap["name"] for entry in full["domains"] for cap in entry["capabilities"]}
    assert {"whoami", "metaListCapabilities", "valueSet"} <= names
    assert "adminUserUsage" not in names  # not an operator
