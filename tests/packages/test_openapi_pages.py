"""/account/integrations/openapi (+ .json, /<name>, its refresh and delete): the signed-in
person's bindings only, and no secret value anywhere."""

from __future__ import annotations

import pytest
from django.test import Client

from apps.packages.models import UserOpenapiBinding, UserOpenapiBindingOperation
from apps.packages.services.openapi import bindings
from tests.packages.openapi_fakes import certificate, petstore, spec_server

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture
def specs(tmp_path, settings):
    cert, key = certificate(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with spec_server(cert, key) as server:
        yield server


@pytest.fixture
def bound(owner, specs) -> str:
    url = specs.put_json("/petstore.json", petstore())
    bindings.save(
        owner.stable_user_id,
        name="pets",
        spec_url=url,
        description="The pet API",
        auth={"type": "bearer", "secretName": "PETS_TOKEN"},
    )
    return url


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_owner_sees_their_bindings_and_operations(owner, bound):
    client = signed_in(owner)
    listing = client.get("/account/integrations/openapi").content.decode()
    assert "pets" in listing and "Pet Store" in listing and "PETS_TOKEN" in listing
    assert client.get("/account/integrations/openapi.json").json()["bindings"][0]["name"] == "pets"
    detail = client.get("/account/integrations/openapi/pets").content.decode()
    assert "listPets" in detail and "showPetById" in detail and "deletePet" not in detail
    assert "https://api.example.com/v1" in detail
    home = client.get("/account").content.decode()
    assert 'href="/account/integrations/openapi"' in home


def test_the_owner_refreshes_and_deletes_from_the_page(owner, bound, specs):
    client = signed_in(owner)
    specs.put_json("/petstore.json", petstore(extra=True))
    response = client.post("/account/integrations/openapi/pets/refresh")
    assert response.status_code == 302
    slugs = UserOpenapiBindingOperation.objects.filter(user_id=owner.stable_user_id)
    assert "get_pets_petId_photos" in set(slugs.values_list("slug", flat=True))
    response = client.post("/account/integrations/openapi/pets/delete")
    assert response.status_code == 302
    assert not UserOpenapiBinding.objects.filter(user_id=owner.stable_user_id).exists()
    assert client.get("/account/integrations/openapi/pets").status_code == 404


def test_an_outsider_sees_nothing_and_cannot_change_the_owners_binding(owner, outsider, bound):
    client = signed_in(outsider)
    listing = client.get("/account/integrations/openapi").content.decode()
    assert "pets" not in listing and "PETS_TOKEN" not in listing
    assert client.get("/account/integrations/openapi.json").json() == {"bindings": []}
    assert client.get("/account/integrations/openapi/pets").status_code == 404
    assert client.post("/account/integrations/openapi/pets/refresh").status_code == 404
    assert client.post("/account/integrations/openapi/pets/delete").status_code == 404
    assert UserOpenapiBindingOperation.objects.filter(user_id=owner.stable_user_id).count() == 2


def test_the_pages_need_a_signed_in_person(client, bound):
    for path in ("/account/integrations/openapi", "/account/integrations/openapi/pets"):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response["Location"]
    assert client.post("/account/integrations/openapi/pets/delete").status_code == 302
    assert UserOpenapiBinding.objects.count() == 1
