"""A person's OpenAPI bindings leave with their export (the auth shape names a secret, never a
value) and go with their account; nobody else's are touched."""

from __future__ import annotations

import io
import json
import secrets

import pytest
from django.core.management import call_command

from apps.accounts.export import service
from apps.accounts.models import User
from apps.packages.models import UserOpenapiBinding, UserOpenapiBindingOperation
from apps.packages.services import crypto
from apps.packages.services import secrets as secret_service
from apps.packages.services.openapi import bindings
from tests.accounts.factories import UserFactory
from tests.packages.openapi_fakes import certificate, petstore, spec_server

pytestmark = pytest.mark.django_db(transaction=True, databases=["default", "audit"])

VALUE = "pets-export-SECRET-VALUE-never-exported"


@pytest.fixture(autouse=True)
def _inline_actors(settings) -> None:
    settings.KODY_ACTORS_INLINE = True


@pytest.fixture(autouse=True)
def fresh_keyring():
    crypto.keyring.cache_clear()
    yield
    crypto.keyring.cache_clear()


@pytest.fixture
def spec_url(tmp_path, settings):
    cert, key = certificate(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with spec_server(cert, key) as server:
        yield server.put_json("/petstore.json", petstore())


def person(name: str) -> User:
    # These tests commit: run-unique people rather than the shared cast.
    return UserFactory(username=f"{name}-{secrets.token_hex(3)}")


def bind(user: User, spec_url: str) -> None:
    secret_service.set_many(
        user.stable_user_id,
        [secret_service.NewSecret("PETS_TOKEN", VALUE, allowed_hosts=["api.example.com"])],
    )
    bindings.save(
        user.stable_user_id,
        name="pets",
        spec_url=spec_url,
        auth={"type": "bearer", "secretName": "PETS_TOKEN"},
    )


def table(user: User, name: str) -> list[dict]:
    page = service.section(user, "d1_table", table=name, limit=100)
    assert page["nextCursor"] is None
    return page["rows"]


def test_the_export_holds_the_owners_bindings_and_no_secret_value(spec_url):
    owner, outsider = person("owner"), person("outsider")
    bind(owner, spec_url)
    bind(outsider, spec_url)
    [binding] = table(owner, "user_openapi_bindings")
    assert binding["user_id"] == owner.stable_user_id and binding["name"] == "pets"
    assert binding["auth_json"] == {"type": "bearer", "secretName": "PETS_TOKEN"}
    operations = table(owner, "user_openapi_binding_operations")
    assert sorted(op["slug"] for op in operations) == ["listPets", "showPetById"]
    assert {op["user_id"] for op in operations} == {owner.stable_user_id}
    counts = {s["table"]: s["count"] for s in service.manifest(owner)["sections"] if "table" in s}
    assert counts["user_openapi_bindings"] == 1
    assert counts["user_openapi_binding_operations"] == 2
    assert VALUE not in json.dumps(binding) + json.dumps(operations)


def test_deleting_an_account_removes_its_bindings_only(spec_url):
    owner, outsider = person("owner"), person("outsider")
    bind(owner, spec_url)
    bind(outsider, spec_url)
    call_command("purge_account", owner.email, "--yes", stdout=io.StringIO())
    assert not UserOpenapiBinding.objects.filter(user_id=owner.stable_user_id).exists()
    assert not UserOpenapiBindingOperation.objects.filter(user_id=owner.stable_user_id).exists()
    assert UserOpenapiBindingOperation.objects.filter(user_id=outsider.stable_user_id).count() == 2
