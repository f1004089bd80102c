"""kody.fetch: a URL from outside never reaches our own network, on the first hop or after a
redirect; the test's own loopback https server stands in for a public host only when the
test-only override says so."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kody.fetch import FetchRefused, is_public_address, safe_get
from tests.accounts.oauth_live import document_server, self_signed


@pytest.mark.parametrize(
    "address",
    [
        "10.0.0.5",
        "172.16.3.4",
        "192.168.1.1",
        "127.0.0.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "0.0.0.0",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:169.254.169.254",  # IPv4-mapped
        "64:ff9b::a9fe:a9fe",  # NAT64 of 169.254.169.254
        "2002:a9fe:a9fe::1",  # 6to4 of 169.254.169.254
        "not-an-ip",
    ],
)
def test_internal_addresses_are_not_public(address: str) -> None:
    assert is_public_address(address) is False


@pytest.mark.parametrize("address", ["93.184.216.34", "2606:4700::6810:85e5"])
def test_public_addresses_are_public(address: str) -> None:
    assert is_public_address(address) is True


def _resolving_to(monkeypatch: pytest.MonkeyPatch, *addresses: str) -> None:
    # DNS is the one outside service here; the answers are what an attacker's zone would say.
    def fake(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


def test_a_name_resolving_to_the_metadata_address_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _resolving_to(monkeypatch, "169.254.169.254")
    with pytest.raises(FetchRefused, match="non-public"):
        safe_get("https://innocent.example/doc.json", max_bytes=1000)


def test_one_private_answer_spoils_a_mixed_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    _resolving_to(monkeypatch, "93.184.216.34", "10.1.2.3")
    with pytest.raises(FetchRefused, match="10.1.2.3"):
        safe_get("https://split.example/doc.json", max_bytes=1000)


@pytest.mark.parametrize(
    "url",
    ["http://public.example/doc.json", "file:///etc/passwd", "https://user:pw@public.example/x"],
)
def test_other_schemes_and_credentials_are_refused(url: str) -> None:
    with pytest.raises(FetchRefused):
        safe_get(url, max_bytes=1000)


@pytest.fixture
def docs(tmp_path: Path, settings: Any) -> Iterator[Any]:
    cert, key = self_signed(tmp_path)
    settings.KODY_FETCH_CA_FILE = str(cert)
    with document_server(cert, key) as server:
        server.documents["/doc.json"] = {"hello": "world"}
        yield server


def test_loopback_is_refused_without_the_test_override(docs: Any, settings: Any) -> None:
    settings.KODY_FETCH_ALLOW_LOOPBACK = False
    with pytest.raises(FetchRefused, match="non-public"):
        safe_get(docs.url + "/doc.json", max_bytes=1000)
    assert docs.hits == []


def test_the_override_lets_a_loopback_https_server_answer(docs: Any, settings: Any) -> None:
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    fetched = safe_get(docs.url + "/doc.json", max_bytes=1000)
    assert fetched.status == 200 and fetched.body == b'{"hello": "world"}'
    assert fetched.headers["content-type"] == "application/json"


def test_a_redirect_to_the_metadata_address_is_refused(docs: Any, settings: Any) -> None:
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    docs.redirects["/hop"] = "https://169.254.169.254/latest/meta-data/"
    with pytest.raises(FetchRefused, match="169.254.169.254"):
        safe_get(docs.url + "/hop", max_bytes=1000)
    assert docs.hits == ["/hop"]


def test_redirects_are_followed_a_few_times_only(docs: Any, settings: Any) -> None:
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    docs.redirects["/a"] = "/b"
    docs.redirects["/b"] = "/doc.json"
    assert safe_get(docs.url + "/a", max_bytes=1000).body == b'{"hello": "world"}'
    docs.redirects["/loop"] = "/loop"
    with pytest.raises(FetchRefused, match="redirects"):
        safe_get(docs.url + "/loop", max_bytes=1000)


def test_a_body_over_the_cap_is_refused(docs: Any, settings: Any) -> None:
    settings.KODY_FETCH_ALLOW_LOOPBACK = True
    with pytest.raises(FetchRefused, match="larger"):
        safe_get(docs.url + "/doc.json", max_bytes=5)
