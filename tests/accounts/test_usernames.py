"""Username format rules and the reserved set: (built-in ∪ added) − removed, failing closed."""

from __future__ import annotations

from typing import Any

import pytest

from apps.accounts import usernames
from apps.accounts.usernames import Override, effective
from kody.kv import store


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


@pytest.mark.parametrize(
    "name",
    [
        "kody",
        "support",
        "abuse",
        "postmaster",
        "security",
        "admin",
        "psl",
        "kody-team",
        "kody-admin",
    ],
)
def test_system_locals_and_kody_built_ins_cannot_be_unreserved(name: str) -> None:
    assert effective(Override(removed=frozenset({name}))).matches(name)
    with pytest.raises(ValueError):
        usernames.remove_reserved(name, by_stable_user_id="op")


@pytest.mark.django_db
def test_missing_override_means_the_built_in_list() -> None:
    assert usernames.read_override() is None
    assert usernames.is_reserved("blog")


@pytest.mark.django_db
def test_unreadable_override_fails_closed_to_built_ins(monkeypatch: pytest.MonkeyPatch) -> None:
    usernames.remove_reserved("blog", by_stable_user_id="op-1")
    assert not usernames.is_reserved("blog")

    def broken(key: str) -> Any:
        raise ConnectionError("kv down")

    monkeypatch.setattr(store, "get_json", broken)
    assert usernames.read_override() is None
    assert usernames.is_reserved("blog")


@pytest.mark.django_db
def test_malformed_override_fails_closed() -> None:
    store.put_json(usernames.OVERRIDE_KEY, {"added": [1, 2], "removed": ["blog"]})
    assert usernames.is_reserved("blog")
    store.put(usernames.OVERRIDE_KEY, b"not json")
    assert usernames.is_reserved("blog")


@pytest.mark.django_db
def test_add_and_remove_round_trip_through_kv() -> None:
    usernames.add_reserved("Acme", by_stable_user_id="op-1")
    usernames.remove_reserved("blog", by_stable_user_id="op-1")
    saved = store.get_json(usernames.OVERRIDE_KEY)
    assert saved["added"] == ["acme"] and saved["removed"] == ["blog"]
    assert saved["updatedBy"] == "op-1" and saved["updatedAt"]
    assert usernames.is_reserved("acme-corp")
    assert not usernames.is_reserved("blog")
    usernames.add_reserved("blog", by_stable_user_id="op-2")
    assert usernames.is_reserved("blog")


@pytest.mark.django_db
def test_signup_honours_the_override() -> None:
    from apps.accounts.services import identity

    usernames.add_reserved("acme", by_stable_user_id="op-1")
    with pytest.raises(identity.UsernameReserved):
        identity.clean_username("acme-official")
    usernames.remove_reserved("blog", by_stable_user_id="op-1")
    assert identity.clean_username("blog") == "blog"
