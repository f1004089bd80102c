"""OpenAPI bindings: a spec served by a local https server is fetched through the SSRF-safe
fetcher, validated, bound with its selected operations (destructive ones only when asked),
refreshed and deleted — each capability for its owner only."""

from __future__ import annotations

import json

import pytest

from apps.packages.models import UserOpenapiBinding, UserOpenapiBindingOperation
from apps.packages.services import secrets
from tests.packages.openapi_fakes import certificate, petstore, spec_server

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def specs(tmp_path, settings):
    cert, key = certificate(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with spec_server(cert, key) as server:
        yield server


def rows(user) -> tuple[list[str], list[tuple[str, str]]]:
    bindings = UserOpenapiBinding.objects.filter(user_id=user.stable_user_id)
    operations = UserOpenapiBindingOperation.objects.filter(user_id=user.stable_user_id)
    return (
        sorted(bindings.values_list("name", flat=True)),
        sorted(operations.values_list("binding_name", "slug")),
    )


def test_owner_binds_a_spec_and_destructive_operations_are_left_out(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    saved = as_owner.call("openapiBindingSave", name="pets", specUrl=url)
    assert saved["created"] is True
    assert saved["operations"] == ["listPets", "showPetById"]
    assert sorted(saved["skippedDestructive"]) == ["createPet", "deletePet"]
    assert saved["binding"]["apiBaseUrl"] == "https://api.example.com/v1"
    assert saved["binding"]["specTitle"] == "Pet Store"
    assert saved["binding"]["specVersion"] == "1.2.0"
    assert rows(owner) == (["pets"], [("pets", "listPets"), ("pets", "showPetById")])

    got = as_owner.call("openapiBindingGet", name="pets")
    by_slug = {op["slug"]: op for op in got["operations"]}
    assert by_slug["showPetById"]["method"] == "GET"
    assert by_slug["showPetById"]["path"] == "/pets/{petId}"
    # The path-level parameter came through its local $ref.
    assert by_slug["showPetById"]["parameters"] == [
        {"name": "petId", "in": "path", "required": True, "type": "string", "description": ""}
    ]
    assert by_slug["listPets"]["destructive"] is False
    listed = as_owner.call("openapiBindingList")["bindings"]
    assert [(b["name"], b["operationCount"]) for b in listed] == [("pets", 2)]


def test_include_destructive_binds_every_operation(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    saved = as_owner.call("openapiBindingSave", name="pets", specUrl=url, includeDestructive=True)
    assert sorted(saved["operations"]) == ["createPet", "deletePet", "listPets", "showPetById"]
    assert saved["skippedDestructive"] == []
    got = as_owner.call("openapiBindingGet", name="pets")
    destructive = {op["slug"]: op["destructive"] for op in got["operations"]}
    assert destructive == {
        "createPet": True,
        "deletePet": True,
        "listPets": False,
        "showPetById": False,
    }
    assert got["operations"][0]["requestBody"] == {
        "required": True,
        "contentTypes": ["application/json"],
    }


def test_naming_a_destructive_operation_without_the_flag_is_refused_and_writes_nothing(
    as_owner, owner, specs
):
    url = specs.put_json("/petstore.json", petstore())
    as_owner.call("openapiBindingSave", name="pets", specUrl=url, operations=["listPets"])
    before = rows(owner)
    error = as_owner.error(
        "openapiBindingSave", 422, name="pets", specUrl=url, operations=["listPets", "deletePet"]
    )
    assert error["code"] == "openapi_destructive_not_included"
    assert error["details"]["operations"] == ["deletePet"]
    assert rows(owner) == before
    unknown = as_owner.error(
        "openapiBindingSave", 422, name="other", specUrl=url, operations=["noSuchThing"]
    )
    assert unknown["code"] == "openapi_operation_not_in_spec"
    assert rows(owner) == before


def test_selection_by_tag_and_replacing_a_binding(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    saved = as_owner.call(
        "openapiBindingSave", name="admin", specUrl=url, tags=["admin"], includeDestructive=True
    )
    assert sorted(saved["operations"]) == ["createPet", "deletePet"]
    again = as_owner.call(
        "openapiBindingSave",
        name="admin",
        specUrl=url,
        operations=["showPetById"],
        apiBaseUrl="https://pets.example.org/api/",
    )
    assert again["created"] is False
    assert again["changes"] == {"added": 1, "updated": 0, "removed": 2, "unchanged": 0}
    assert again["binding"]["apiBaseUrl"] == "https://pets.example.org/api"
    assert again["binding"]["selection"] == {"operations": ["showPetById"]}
    assert rows(owner) == (["admin"], [("admin", "showPetById")])


def test_auth_stores_the_secret_name_only(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    auth = {"type": "header", "secretName": "PETS_KEY", "name": "X-Api-Key"}
    saved = as_owner.call("openapiBindingSave", name="pets", specUrl=url, auth=auth)
    assert saved["binding"]["auth"] == {
        "type": "header",
        "secretName": "PETS_KEY",
        "name": "X-Api-Key",
    }
    stored = UserOpenapiBinding.objects.get(user_id=owner.stable_user_id, name="pets")
    assert stored.auth_json == {"type": "header", "secretName": "PETS_KEY", "name": "X-Api-Key"}
    # A credential value has no place in the shape.
    error = as_owner.error(
        "openapiBindingSave",
        422,
        name="pets2",
        specUrl=url,
        auth={"type": "bearer", "secretName": "PETS_KEY", "token": "sk-live-123"},
    )
    assert error["code"] == "invalid_input"
    missing = as_owner.error(
        "openapiBindingSave", 422, name="pets2", specUrl=url, auth={"type": "bearer"}
    )
    assert missing["code"] == "invalid_input"
    assert rows(owner)[0] == ["pets"]


def test_refresh_reconciles_operations_with_the_changed_spec(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    as_owner.call("openapiBindingSave", name="pets", specUrl=url)
    changed = petstore(extra=True)
    del changed["paths"]["/pets"]["get"]  # listPets vanishes
    changed["paths"]["/pets/{petId}"]["get"]["summary"] = "One pet, in detail"
    changed["info"]["version"] = "2.0.0"
    specs.put_json("/petstore.json", changed)

    refreshed = as_owner.call("openapiBindingRefresh", name="pets")
    assert refreshed["changes"] == {"added": 1, "updated": 1, "removed": 1, "unchanged": 0}
    assert refreshed["binding"]["specVersion"] == "2.0.0"
    assert rows(owner)[1] == [("pets", "get_pets_petId_photos"), ("pets", "showPetById")]
    got = {op["slug"]: op for op in as_owner.call("openapiBindingGet", name="pets")["operations"]}
    assert got["showPetById"]["summary"] == "One pet, in detail"

    # A spec gone bad refreshes nothing.
    specs.put_raw("/petstore.json", b'{"openapi": "3.0.3", "paths": {}}', "application/json")
    before = rows(owner)
    error = as_owner.error("openapiBindingRefresh", 422, name="pets")
    assert error["code"] == "openapi_spec_invalid"
    assert rows(owner) == before
    stored = UserOpenapiBinding.objects.get(user_id=owner.stable_user_id, name="pets")
    assert stored.spec_version == "2.0.0"


def test_delete_removes_the_binding_and_its_operations(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    as_owner.call("openapiBindingSave", name="pets", specUrl=url)
    assert as_owner.call("openapiBindingDelete", name="pets") == {"deleted": True, "name": "pets"}
    assert rows(owner) == ([], [])
    error = as_owner.error("openapiBindingGet", 404, name="pets")
    assert error["code"] == "openapi_binding_not_found"
    assert as_owner.error("openapiBindingDelete", 404, name="pets")["code"] == (
        "openapi_binding_not_found"
    )


def test_a_yaml_spec_with_a_relative_server_is_bound(as_owner, specs):
    document = (
        "openapi: 3.1.0\n"
        "info: {title: Tiny, version: '1'}\n"
        "servers: [{url: /api}]\n"
        "paths:\n"
        "  /ping:\n"
        "    get:\n"
        "      operationId: ping\n"
        "      responses: {'200': {description: ok}}\n"
    )
    url = specs.put_raw("/tiny.yaml", document.encode())
    saved = as_owner.call("openapiBindingSave", name="tiny", specUrl=url)
    assert saved["operations"] == ["ping"]
    assert saved["binding"]["apiBaseUrl"] == specs.url + "/api"


def test_summarize_answers_the_spec_and_writes_nothing(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    summary = as_owner.call("openapiSpecSummarize", specUrl=url)
    assert summary["title"] == "Pet Store" and summary["openapiVersion"] == "3.0.3"
    assert summary["operationCount"] == 4 and summary["destructiveCount"] == 2
    assert summary["tags"] == ["pets", "admin"]
    assert [(op["method"], op["path"]) for op in summary["operations"]] == [
        ("GET", "/pets"),
        ("POST", "/pets"),
        ("GET", "/pets/{petId}"),
        ("DELETE", "/pets/{petId}"),
    ]
    assert UserOpenapiBinding.objects.count() == 0
    assert UserOpenapiBindingOperation.objects.count() == 0


def test_an_outsider_sees_and_touches_none_of_the_owners_bindings(
    as_owner, as_outsider, owner, outsider, specs
):
    url = specs.put_json("/petstore.json", petstore())
    as_owner.call("openapiBindingSave", name="pets", specUrl=url)
    before = rows(owner)

    assert as_outsider.call("openapiBindingList") == {"bindings": []}
    for name in ("openapiBindingGet", "openapiBindingDelete", "openapiBindingRefresh"):
        error = as_outsider.error(name, 404, name="pets")
        assert error["code"] == "openapi_binding_not_found", name
    error = as_outsider.error("openapiClientScaffold", 404, bindingName="pets")
    assert error["code"] == "openapi_binding_not_found"
    # Not found looks the same as for a name nobody has.
    foreign = as_outsider.error("openapiBindingGet", 404, name="pets")
    missing = as_outsider.error("openapiBindingGet", 404, name="nobody-has-this")
    assert (foreign["code"], foreign["message"]) == (missing["code"], missing["message"])

    # The outsider's own binding of the same name is theirs alone.
    as_outsider.call("openapiBindingSave", name="pets", specUrl=url, operations=["listPets"])
    assert rows(owner) == before
    assert rows(outsider) == (["pets"], [("pets", "listPets")])
    assert [b["operationCount"] for b in as_owner.call("openapiBindingList")["bindings"]] == [2]
    as_outsider.call("openapiBindingDelete", name="pets")
    assert rows(owner) == before
    # Summarize reads nobody's rows and writes none.
    summary = as_outsider.call("openapiSpecSummarize", specUrl=url)
    assert summary["operationCount"] == 4 and rows(outsider) == ([], [])
    assert "pets" not in json.dumps(as_outsider.call("openapiBindingList"))


ISOLATION_COVERED = {
    "openapiBindingSave", "openapiBindingGet", "openapiBindingList", "openapiBindingDelete",
    "openapiBindingRefresh", "openapiSpecSummarize", "openapiClientScaffold",
}  # fmt: skip


def test_every_openapi_capability_has_an_isolation_test():
    from kody.capabilities import all_capabilities

    declared = {
        c.name
        for c in all_capabilities()
        if c.handler.__module__ == "apps.packages.capabilities.openapi"
    }
    assert declared == ISOLATION_COVERED
    domains = {c.name: c.domain for c in all_capabilities() if c.name in declared}
    assert {n for n, d in domains.items() if d == "integrations"} == {
        "openapiSpecSummarize",
        "openapiClientScaffold",
    }


def test_saving_with_a_secret_that_does_not_exist_warns(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    auth = {"type": "bearer", "secretName": "PETS_TOKEN"}
    saved = as_owner.call("openapiBindingSave", name="pets", specUrl=url, auth=auth)
    [warning] = saved["warnings"]
    assert warning["code"] == "openapi_secret_missing" and warning["secretName"] == "PETS_TOKEN"
    assert rows(owner)[0] == ["pets"]  # saved all the same: the secret may come later
    assert as_owner.call("openapiBindingRefresh", name="pets")["warnings"] == [warning]
    secrets.set_many(
        owner.stable_user_id,
        [secrets.NewSecret(name="PETS_TOKEN", value="s3cr3t", allowed_hosts=["api.example.com"])],
    )
    again = as_owner.call("openapiBindingSave", name="pets", specUrl=url, auth=auth)
    assert again["warnings"] == []
    assert as_owner.call("openapiBindingSave", name="open", specUrl=url)["warnings"] == []


def test_an_outsiders_secret_of_that_name_does_not_count(as_owner, outsider, specs):
    url = specs.put_json("/petstore.json", petstore())
    secrets.set_many(
        outsider.stable_user_id,
        [secrets.NewSecret(name="PETS_TOKEN", value="theirs", allowed_hosts=["api.example.com"])],
    )
    auth = {"type": "bearer", "secretName": "PETS_TOKEN"}
    saved = as_owner.call("openapiBindingSave", name="pets", specUrl=url, auth=auth)
    assert [w["code"] for w in saved["warnings"]] == ["openapi_secret_missing"]


def test_refresh_takes_the_specs_new_server_unless_the_base_url_was_given(as_owner, owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    as_owner.call("openapiBindingSave", name="pets", specUrl=url)
    as_owner.call(
        "openapiBindingSave", name="mine", specUrl=url, apiBaseUrl="https://proxy.example.org/v1"
    )
    specs.put_json("/petstore.json", petstore("https://api2.example.com/v2"))

    moved = as_owner.call("openapiBindingRefresh", name="pets")
    assert moved["apiBaseUrlChanged"] is True
    assert moved["binding"]["apiBaseUrl"] == "https://api2.example.com/v2"
    assert moved["binding"]["apiBaseUrlExplicit"] is False
    kept = as_owner.call("openapiBindingRefresh", name="mine")
    assert kept["apiBaseUrlChanged"] is False
    assert kept["binding"]["apiBaseUrl"] == "https://proxy.example.org/v1"
    stored = UserOpenapiBinding.objects.get(user_id=owner.stable_user_id, name="pets")
    assert stored.api_base_url == "https://api2.example.com/v2"
    # Unchanged spec: nothing moves.
    assert as_owner.call("openapiBindingRefresh", name="pets")["apiBaseUrlChanged"] is False
