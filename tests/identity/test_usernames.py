"""Username format rules and the reserved set: (built-in ∪ added) − removed, failing closed."""

from __future__ import annotations

import types
from typing import Any

import pytest

import kody
from apps.accounts import usernames
from apps.accounts.usernames import Override, effective


@pytest.mark.parametrize("name", ["ab", "a" * 40, "-abc", "abc-", "a--b", "a_b", "a.b", "Ünï", ""])
def test_bad_format_is_explained(name: str) -> None:
    assert usernames.format_error(name)


@pytest.mark.parametrize("name", ["abc", "a1-b2", "x" * 39, "42-things"])
def test_good_format_passes(name: str) -> None:
    assert usernames.format_error(name) is None


@pytest.mark.parametrize(
    "name", ["kody", "KODY", "support", "post-master", "post_master", "Ab_Use", "psl", "www"]
)
def test_built_in_names_are_reserved_exact_or_stripped(name: str) -> None:
    assert effective(None).matches(name)


@pytest.mark.parametrize("name", ["my-kody-bot", "thekodyteam", "x-postmaster-y"])
def test_built_in_roots_match_as_substrings(name: str) -> None:
    assert effective(None).matches(name)


def test_ordinary_built_ins_do_not_match_as_substrings() -> None:
    assert not effective(None).matches("blogger")
    assert not effective(None).matches("supportive")


def test_operator_added_tokens_match_exact_stripped_and_substring() -> None:
    reserved = effective(Override(added=frozenset({"acme"})))
    assert reserved.matches("acme")
    assert reserved.matches("a-c-m-e")
    assert reserved.matches("acme-official")


def test_operator_can_unreserve_an_ordinary_built_in() -> None:
    reserved = effective(Override(removed=frozenset({"blog"})))
    assert not reserved.matches("blog")


@pytest.mark.parametrize("name", ["kody", "support", "abuse", "postmaster", "security", "admin",
                                  "psl", "kody-team", "kody-admin"])
def test_system_locals_and_kody_built_ins_cannot_be_unreserved(name: str) -> None:
    assert effective(Override(removed=frozenset({name}))).matches(name)
    with pytest.raises(ValueError):
        usernames.remove_reserved(name, by_stable_user_id="op")


def _fake_kv(monkeypatch: pytest.MonkeyPatch, get_json: Any) -> dict[str, Any]:
    store: dict[str, Any] = {}
    fake = types.SimpleNamespace(
        get_json=get_json or store.get, put_json=lambda key, value: store.__setitem__(key, value)
    )
    monkeypatch.setattr(kody, "kv", fake, raising=False)
    monkeypatch.setitem(__import__("sys").modules, "kody.kv", fake)
    return store


def test_unreadable_override_fails_closed_to_built_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(key: str) -> Any:
        raise ConnectionError("kv down")

    _fake_kv(monkeypatch, broken)
    assert usernames.read_override() is None
    assert usernames.is_reserved("blog")


def test_malformed_override_fails_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_kv(monkeypatch, lambda key: {"added": [1, 2], "removed": ["blog"]})
    assert usernames.is_reserved("blog")


def test_add_and_remove_round_trip_through_kv(monkeypatch: pytest.MonkeyPatch) -> None:
    store = _fake_kv(monkeypatch, None)
    usernames.add_reserved("Acme", by_stable_user_id="op-1")
    usernames.remove_reserved("blog", by_stable_user_id="op-1")
    saved = store[usernames.OVERRIDE_KEY]
    assert saved["added"] == ["acme"] and saved["removed"] == ["blog"]
    assert saved["updatedBy"] == "op-1"
    assert usernames.is_reserved("acme-corp")
    assert not usernames.is_reserved("blog")
