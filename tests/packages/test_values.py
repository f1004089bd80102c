"""Values over the agent API: set, get, list, delete — and the outsider who sees none of it."""

from __future__ import annotations

import pytest

from apps.packages.models import ValueBucket, ValueEntry

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


def test_owner_sets_reads_lists_and_deletes_a_value(as_owner, owner):
    saved = as_owner.call("valueSet", name="home_city", value="Lisbon", description="where")
    assert saved["value"]["name"] == "home_city" and saved["value"]["scope"] == "user"
    assert as_owner.call("valueGet", name="home_city")["value"]["value"] == "Lisbon"

    as_owner.call("valueSet", name="home_city", value="Porto")
    as_owner.call("valueSet", name="theme", value="dark")
    listed = as_owner.call("valueList")["values"]
    assert [(v["name"], v["value"]) for v in listed] == [("home_city", "Porto"), ("theme", "dark")]
    assert ValueBucket.objects.get(user_id=owner.stable_user_id).scope == "user"

    assert as_owner.call("valueDelete", name="theme") == {"deleted": True, "name": "theme"}
    assert as_owner.error("valueGet", 404, name="theme")["code"] == "value_not_found"


def test_app_scoped_values_are_separate_per_binding_key(as_owner):
    as_owner.call("valueSet", name="token_url", value="a", scope="app", bindingKey="app-1")
    as_owner.call("valueSet", name="token_url", value="b", scope="app", bindingKey="app-2")
    got = as_owner.call("valueGet", name="token_url", scope="app", bindingKey="app-2")
    assert got["value"]["value"] == "b"
    assert as_owner.call("valueList")["values"] == []


def test_scope_and_binding_key_must_agree(as_owner, owner):
    # The schema states the rule, so the refusal names the missing or extra field.
    missing = as_owner.error("valueSet", 422, name="x", value="1", scope="app")["details"]
    assert "bindingKey" in missing["errors"][0]["message"]
    extra = as_owner.error("valueSet", 422, name="x", value="1", bindingKey="k")["details"]
    assert extra["errors"] == [{"path": "/", "message": "A user-scoped value takes no bindingKey."}]
    as_owner.error("valueSet", 422, name="bad name", value="1")
    assert not ValueEntry.objects.filter(bucket__user_id=owner.stable_user_id).exists()


def test_outsider_cannot_see_or_delete_the_owners_values(as_owner, as_outsider):
    as_owner.call("valueSet", name="home_city", value="Lisbon")
    as_owner.call("valueSet", name="k", value="v", scope="app", bindingKey="app-1")
    assert as_outsider.error("valueGet", 404, name="home_city")["code"] == "value_not_found"
    assert as_outsider.error("valueDelete", 404, name="home_city")["code"] == "value_not_found"
    assert as_outsider.call("valueList")["values"] == []
    assert as_outsider.call("valueList", scope="app", bindingKey="app-1")["values"] == []
    assert as_owner.call("valueGet", name="home_city")["value"]["value"] == "Lisbon"
