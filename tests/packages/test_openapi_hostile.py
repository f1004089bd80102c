"""Hostile spec URLs and documents: each is refused with a coded 4xx and writes nothing, and
nothing but the one spec URL (and its checked redirects) is ever fetched."""

from __future__ import annotations

import json

import pytest

import kody.fetch
from apps.packages.models import UserOpenapiBinding, UserOpenapiBindingOperation
from apps.packages.services.openapi.spec import MAX_SPEC_BYTES
from tests.packages.openapi_fakes import SPEC_HOST, certificate, petstore, spec_server

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

INFO = b'"info": {"title": "x", "version": "1"}, "paths": {}}'


@pytest.fixture
def specs(tmp_path, settings):
    cert, key = certificate(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with spec_server(cert, key) as server:
        yield server


def refused(agent, url: str, status: int = 422, **extra) -> dict:
    """Both capabilities that fetch a spec refuse it the same way, and nothing is written."""
    error = agent.error("openapiBindingSave", status, name="hostile", specUrl=url, **extra)
    again = agent.error("openapiSpecSummarize", status, specUrl=url)
    assert again["code"] == error["code"]
    assert UserOpenapiBinding.objects.count() == 0
    assert UserOpenapiBindingOperation.objects.count() == 0
    return error


def test_a_spec_over_the_size_cap_is_refused(as_owner, specs):
    padding = " " * (MAX_SPEC_BYTES + 10)
    url = specs.put_raw("/huge.json", (json.dumps(petstore()) + padding).encode())
    error = refused(as_owner, url, 413)
    assert error["code"] == "openapi_spec_too_large"
    assert error["details"] == {"maxBytes": MAX_SPEC_BYTES}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b"\xff\xfe not text", "openapi_spec_invalid"),
        (b"{not json: [unclosed", "openapi_spec_invalid"),
        (b"[1, 2, 3]", "openapi_spec_invalid"),
        (b'{"openapi": "3.0.3", "paths": {}}', "openapi_spec_invalid"),  # no info
        (b'{"openapi": "9.9.9", ' + INFO, "openapi_spec_invalid"),
        (b'{"openapi": "3.9.0", ' + INFO, "openapi_spec_unsupported"),
        (b'{"swagger": "2.0", ' + INFO, "openapi_spec_unsupported"),
        (b"a: &a [1, 2]\nb: [*a, *a]\n", "openapi_spec_invalid"),  # YAML aliases expand
        (b"[" * 5000 + b"]" * 5000, "openapi_spec_invalid"),  # nesting
    ],
)  # fmt: skip
def test_documents_that_are_not_valid_openapi_are_refused(as_owner, specs, body, code):
    url = specs.put_raw("/bad", body, "application/json")
    error = refused(as_owner, url)
    assert error["code"] == code


def test_validation_errors_are_reported(as_owner, specs):
    document = petstore()
    document["paths"]["/pets"]["get"]["responses"] = "not a map"
    error = refused(as_owner, specs.put_json("/broken.json", document))
    assert error["code"] == "openapi_spec_invalid"
    assert error["details"]["errors"]


def test_an_external_reference_is_refused_before_anything_fetches_it(as_owner, specs):
    document = petstore()
    # The validator would fetch this itself, past the SSRF check; it must never be asked to.
    document["components"]["schemas"]["Pet"] = {"$ref": specs.url + "/internal-secret.json"}
    specs.put_json("/internal-secret.json", {"type": "object"})
    error = refused(as_owner, specs.put_json("/external.json", document))
    assert error["code"] == "openapi_spec_unsupported"
    assert "/internal-secret.json" not in specs.hits


def test_a_private_address_is_refused(as_owner, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    for url in ("https://10.0.0.1/spec.json", "https://169.254.169.254/latest/meta-data/"):
        assert refused(as_owner, url)["code"] == "openapi_spec_fetch_refused"


def test_loopback_is_refused_unless_the_test_override_allows_it(as_owner, specs, settings):
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    url = specs.put_json("/petstore.json", petstore())
    assert refused(as_owner, url)["code"] == "openapi_spec_fetch_refused"
    assert specs.hits == []


def test_a_redirect_to_loopback_is_refused_on_the_hop(as_owner, specs, settings, monkeypatch):
    # The spec host stands in for a public server (its name is mapped to the local server);
    # the redirect's target goes through the real check, with loopback not allowed.
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    real = kody.fetch.resolve_checked

    def resolve(host: str, port: int) -> list[str]:
        return ["127.0.0.1"] if host == SPEC_HOST else real(host, port)

    monkeypatch.setattr(kody.fetch, "resolve_checked", resolve)
    specs.put_json("/petstore.json", petstore())
    specs.redirects["/hop"] = f"https://127.0.0.1:{specs.port}/petstore.json"
    error = refused(as_owner, f"https://{SPEC_HOST}:{specs.port}/hop")
    assert error["code"] == "openapi_spec_fetch_refused"
    assert specs.hits == ["/hop", "/hop"]  # once per capability, never the loopback target
    # The same spec straight from the stand-in host binds.
    saved = as_owner.call(
        "openapiBindingSave", name="pets", specUrl=f"https://{SPEC_HOST}:{specs.port}/petstore.json"
    )
    assert saved["operations"] == ["listPets", "showPetById"]


def test_a_redirect_to_the_metadata_address_is_refused(as_owner, specs):
    specs.redirects["/hop"] = "https://169.254.169.254/latest/meta-data/"
    assert refused(as_owner, specs.url + "/hop")["code"] == "openapi_spec_fetch_refused"


def test_a_missing_document_and_plain_http_are_refused(as_owner, specs):
    assert refused(as_owner, specs.url + "/nothing-here")["code"] == "openapi_spec_fetch_failed"
    error = as_owner.error(
        "openapiBindingSave", 422, name="x", specUrl=f"http://127.0.0.1:{specs.port}/x.json"
    )
    assert error["code"] == "invalid_input"


def test_a_bad_api_base_url_is_refused_before_fetching(as_owner, specs):
    url = specs.put_json("/petstore.json", petstore())
    error = as_owner.error(
        "openapiBindingSave", 422, name="x", specUrl=url, apiBaseUrl="ftp://files.example.com/"
    )
    assert error["code"] == "openapi_base_url_missing" and specs.hits == []
    no_server = petstore()
    del no_server["servers"]
    error = as_owner.error(
        "openapiBindingSave", 422, name="x", specUrl=specs.put_json("/bare.json", no_server)
    )
    assert error["code"] == "openapi_base_url_missing"
    assert UserOpenapiBinding.objects.count() == 0
