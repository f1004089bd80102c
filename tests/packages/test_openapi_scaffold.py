"""A bound spec's operations are called from sandboxed code: the scaffolded client module runs
through ``execute``, its fetch goes through the host to a local API, and the binding's secret
is filled in by the host for the API's host only, never coming back."""

from __future__ import annotations

import json

import pytest

from apps.packages.services import crypto, secrets
from tests.packages.openapi_fakes import API_HOST, certificate, pet_api, petstore, spec_server

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

VALUE = "pets-live-Q7x2-SECRET-do-not-leak"


@pytest.fixture
def specs(tmp_path, settings):
    cert, key = certificate(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with spec_server(cert, key) as server:
        yield server


@pytest.fixture
def api(settings):
    settings.KODY_EXECUTE_FETCH_ALLOW = {API_HOST}
    with pet_api() as server:
        yield server


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


def bind(agent, specs, api, **extra):
    url = specs.put_json("/petstore.json", petstore(api.base))
    return agent.call("openapiBindingSave", name="pets", specUrl=url, **extra)


def run(agent, module: str, body: str):
    """The scaffolded module as an ES module whose default export calls it."""
    code = module + "\nexport default async () => {\n" + body + "\n};\n"
    return agent.call("execute", code=code)


def test_the_scaffold_calls_bound_operations_through_the_runtime_fetch(as_owner, owner, specs, api):
    bind(
        as_owner,
        specs,
        api,
        includeDestructive=True,
        auth={"type": "bearer", "secretName": "PETS_TOKEN"},
    )
    secrets.set_many(
        owner.stable_user_id, [secrets.NewSecret("PETS_TOKEN", VALUE, allowed_hosts=[API_HOST])]
    )
    scaffold = as_owner.call("openapiClientScaffold", bindingName="pets")
    assert scaffold["packageName"] == f"@{owner.username}/pets-client"
    assert sorted(scaffold["files"]) == ["README.md", "mod.ts", "package.json"]
    assert {f["name"] for f in scaffold["functions"]} == {
        "listPets",
        "showPetById",
        "createPet",
        "deletePet",
    }
    module = scaffold["files"]["mod.ts"]
    assert VALUE not in json.dumps(scaffold) and "{{secret:PETS_TOKEN}}" in module

    reply = run(
        as_owner,
        module,
        "return [await listPets({ limit: 5 }), await showPetById({ petId: 'a b' }),"
        " await createPet({ body: { name: 'Kit' } }), await deletePet({ petId: '9' })];",
    )
    assert reply["result"] == [
        [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}],
        {"id": "a%20b", "method": "GET"},
        {"id": 3, "name": "Kit"},
        {"id": "9", "method": "DELETE"},
    ]
    assert [(s["method"], s["path"]) for s in api.seen] == [
        ("GET", "/v1/pets?limit=5"),
        ("GET", "/v1/pets/a%20b"),
        ("POST", "/v1/pets"),
        ("DELETE", "/v1/pets/9"),
    ]
    assert all(s["headers"]["authorization"] == f"Bearer {VALUE}" for s in api.seen)
    assert json.loads(api.seen[2]["body"]) == {"name": "Kit"}
    assert VALUE not in json.dumps(reply)


def test_query_auth_and_an_error_answer(as_owner, owner, specs, api):
    bind(as_owner, specs, api, auth={"type": "query", "secretName": "PETS_KEY", "name": "key"})
    secrets.set_many(
        owner.stable_user_id, [secrets.NewSecret("PETS_KEY", VALUE, allowed_hosts=[API_HOST])]
    )
    module = as_owner.call("openapiClientScaffold", bindingName="pets")["files"]["mod.ts"]
    assert "deletePet" not in module  # not bound without includeDestructive
    reply = run(as_owner, module, "return await listPets({ limit: 2 });")
    assert reply["result"][0]["name"] == "Rex"
    assert api.seen[0]["path"] == f"/v1/pets?limit=2&key={VALUE}"
    # A non-2xx answer surfaces as an error in the calling code.
    error = as_owner.error(
        "execute",
        422,
        code=module.replace('"/v1"', '"/nowhere"').replace(api.base, api.base + "/missing")
        + "\nexport default async () => await listPets();\n",
    )
    assert "answered 404" in json.dumps(error)


def test_a_secret_not_allowed_for_the_api_host_is_never_sent(as_owner, owner, specs, api):
    bind(as_owner, specs, api, auth={"type": "bearer", "secretName": "PETS_TOKEN"})
    secrets.set_many(
        owner.stable_user_id,
        [secrets.NewSecret("PETS_TOKEN", VALUE, allowed_hosts=["elsewhere.example.com"])],
    )
    module = as_owner.call("openapiClientScaffold", bindingName="pets")["files"]["mod.ts"]
    error = as_owner.error(
        "execute", 422, code=module + "\nexport default async () => await listPets();\n"
    )
    assert error["code"] == "fetch_refused" and api.seen == []


def test_the_scaffold_publishes_as_a_package(as_owner, owner, specs, api):
    bind(as_owner, specs, api, auth={"type": "header", "secretName": "K", "name": "X-Api-Key"})
    scaffold = as_owner.call("openapiClientScaffold", bindingName="pets", packageName="petstore")
    assert scaffold["packageName"] == f"@{owner.username}/petstore"
    saved = as_owner.raw("packageSave", files=scaffold["files"])
    assert saved.status_code == 200, saved.content


def test_a_package_name_that_is_not_lower_case_is_refused(as_owner, specs, api):
    bind(as_owner, specs, api)
    error = as_owner.error("openapiClientScaffold", 422, bindingName="pets", packageName="Pets")
    assert error["code"] == "invalid_input"


def test_names_and_text_from_the_spec_never_become_code(as_owner, specs, api):
    document = petstore(api.base)
    listing = document["paths"]["/pets"]["get"]
    listing["summary"] = "*/ throw new Error('injected'); /*"
    listing["operationId"] = "list pets`${globalThis.x = 1}`"
    listing["parameters"] = [
        {"name": 'q"]; throw new Error("injected"); //', "in": "query", "schema": {}},
        {"name": "limit", "in": "query", "schema": {"type": "integer"}},
        {"name": "limit", "in": "header", "schema": {"type": "integer"}},
    ]
    url = specs.put_json("/weird.json", document)
    as_owner.call("openapiBindingSave", name="weird", specUrl=url)
    scaffold = as_owner.call("openapiClientScaffold", bindingName="weird")
    names = {f["operation"]: f["name"] for f in scaffold["functions"]}
    fn = names["list_pets_globalThis.x_1"]
    assert fn == "listPetsGlobalThisX1"
    module = scaffold["files"]["mod.ts"]
    body = f'return await {fn}({{ limit: 3, \'q"]; throw new Error("injected"); //\': "x" }});'
    reply = run(as_owner, module, body)
    assert reply["result"][0]["name"] == "Rex"
    [seen] = api.seen
    assert seen["path"].startswith("/v1/pets?")
    assert "limit=3" in seen["path"] and "injected" in seen["path"]  # sent as data, not run
