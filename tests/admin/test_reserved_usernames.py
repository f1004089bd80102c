"""Reserved usernames are edited by operators, on the admin page and through the
``adminReservedUsername*`` capabilities: every change audited first, protected system names
stay reserved, bad names are a coded 4xx, a person can change nothing, and a name reserved
here refuses signup."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from apps.accounts import usernames
from apps.accounts.models import AuditEvent, User
from apps.accounts.services.tokens import create_token
from kody.kv import store
from tests.cast import PASSWORD, bearer
from tests.concurrency import in_threads

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

URL = "/admin/accounts/user/reserved-usernames/"
SITE_URL = "/admin/reserved-usernames/"
ADD, REMOVE, LIST = (
    "adminReservedUsernameAdd",
    "adminReservedUsernameRemove",
    "adminReservedUsernameList",
)


def admin_rows() -> list[tuple[str, str, str | None]]:
    return list(
        AuditEvent.objects.filter(action__startswith="adminReservedUsername")
        .order_by("pk")
        .values_list("action", "result", "reason")
    )


def call(api: Any, user: User, capability: str, /, **arguments: Any) -> Any:
    raw = create_token(user, "reserved names", enforce_rate_limit=False)[1]
    return api.post(f"/api/v1/capabilities/{capability}", arguments, format="json", **bearer(raw))


@pytest.fixture(autouse=True)
def _inline_actors(settings: Any) -> None:
    settings.KODY_ACTORS_INLINE = True  # a mutating capability takes the caller's write lease


@pytest.fixture
def cut_audit(monkeypatch: pytest.MonkeyPatch) -> Any:
    """From the call on, the audit trail cannot be written: an audit-first change must then
    not happen."""

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("audit database unavailable")

    return lambda: monkeypatch.setattr(AuditEvent.objects, "create", refuse)


# --- the admin page --------------------------------------------------------------------------


@pytest.mark.parametrize("url", [URL, SITE_URL])
def test_an_operator_reserves_and_releases_a_name_audited_first(operator_client, url):
    page = operator_client.get(url)
    assert page.status_code == 200 and b"Reserved usernames" in page.content
    assert operator_client.post(url, {"name": "Launchpad", "action": "add"}).status_code == 302
    assert usernames.is_reserved("launchpad") and usernames.is_reserved("my-launchpad")
    assert b"launchpad" in operator_client.get(url).content
    operator_client.post(url, {"name": "launchpad", "action": "remove"})
    assert not usernames.is_reserved("launchpad")
    operator_client.post(url, {"name": "docs", "action": "remove"})  # a built-in, releasable
    assert not usernames.is_reserved("docs")
    assert admin_rows() == [
        (f"{ADD}:intent", "success", "launchpad"),
        (ADD, "success", "launchpad"),
        (f"{REMOVE}:intent", "success", "launchpad"),
        (REMOVE, "success", "launchpad"),
        (f"{REMOVE}:intent", "success", "docs"),
        (REMOVE, "success", "docs"),
    ]


def test_the_page_changes_nothing_it_cannot_audit_first(operator_client, cut_audit):
    cut_audit()
    with pytest.raises(RuntimeError):
        operator_client.post(SITE_URL, {"name": "launchpad", "action": "add"})
    assert store.get(usernames.OVERRIDE_KEY) is None and not usernames.is_reserved("launchpad")


def test_a_protected_name_cannot_be_released(operator_client):
    response = operator_client.post(URL, {"name": "postmaster", "action": "remove"}, follow=True)
    assert b"protected" in response.content
    assert usernames.is_reserved("postmaster")
    assert admin_rows()[-1] == (REMOVE, "failure", "postmaster")


def test_the_page_refuses_a_bad_name_and_writes_nothing(operator_client):
    response = operator_client.post(URL, {"name": "no spaces!", "action": "add"}, follow=True)
    assert b"letters or digits" in response.content
    assert store.get(usernames.OVERRIDE_KEY) is None and admin_rows() == []


def test_the_user_list_links_to_the_page(operator_client):
    assert URL.encode() in operator_client.get("/admin/accounts/user/").content


@pytest.mark.parametrize("url", [URL, SITE_URL])
def test_a_person_cannot_reach_the_page(owner_client, url):
    response = owner_client.post(url, {"name": "grabbed", "action": "add"})
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert owner_client.get(url).status_code == 302
    assert not usernames.is_reserved("grabbed") and admin_rows() == []


# --- the capabilities ------------------------------------------------------------------------


def test_an_operator_lists_adds_and_removes_audited_first(api, operator):
    listed = call(api, operator, LIST).json()
    assert listed["added"] == [] and "support" in listed["builtIn"]

    added = call(api, operator, ADD, name="Moonbase")
    assert added.status_code == 200, added.content
    body = added.json()
    assert body["name"] == "moonbase" and body["reserved"] is True
    assert body["override"]["added"] == ["moonbase"]
    assert body["override"]["updatedBy"] == operator.stable_user_id
    assert usernames.is_reserved("moonbase-fan")

    assert call(api, operator, LIST).json()["added"] == ["moonbase"]
    removed = call(api, operator, REMOVE, name="moonbase").json()
    assert removed["reserved"] is False and removed["override"]["added"] == []
    assert not usernames.is_reserved("moonbase")
    writes = [(a, r) for a, r, _ in admin_rows() if not a.startswith(LIST)]
    assert writes == [
        (f"{ADD}:intent", "success"),
        (ADD, "success"),
        (f"{REMOVE}:intent", "success"),
        (REMOVE, "success"),
    ]


def test_a_capability_changes_nothing_it_cannot_audit_first(api, operator, cut_audit):
    raw = create_token(operator, "reserved names", enforce_rate_limit=False)[1]
    cut_audit()
    response = api.post(
        f"/api/v1/capabilities/{ADD}", {"name": "moonbase"}, format="json", **bearer(raw)
    )
    assert response.status_code == 500
    assert store.get(usernames.OVERRIDE_KEY) is None and not usernames.is_reserved("moonbase")


@pytest.mark.parametrize(
    ("name", "arguments"),
    [(LIST, {}), (ADD, {"name": "grabbed"}), (REMOVE, {"name": "support"})],
)
def test_a_person_gets_403_and_nothing_changes(api, owner, name, arguments):
    response = call(api, owner, name, **arguments)
    assert response.status_code == 403 and response.json()["error"]["code"] == "forbidden"
    assert store.get(usernames.OVERRIDE_KEY) is None
    assert usernames.is_reserved("support") and not usernames.is_reserved("grabbed")
    assert not AuditEvent.objects.filter(action__endswith=":intent").exists()


@pytest.mark.parametrize("bad", ["a", "two  words", "under__double", "-edge", "x" * 40, "émile"])
def test_an_invalid_name_is_a_coded_4xx_and_changes_nothing(api, operator, bad):
    response = call(api, operator, ADD, name=bad)
    assert response.status_code == 422, response.content
    assert response.json()["error"]["code"] == "invalid_input"
    assert store.get(usernames.OVERRIDE_KEY) is None
    assert not AuditEvent.objects.filter(action__endswith=":intent").exists()


def test_a_protected_name_is_a_coded_409_and_stays_reserved(api, operator):
    response = call(api, operator, REMOVE, name="postmaster")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "protected_username"
    assert usernames.is_reserved("postmaster")
    assert [(a, r) for a, r, _ in admin_rows()] == [
        (f"{REMOVE}:intent", "success"),
        (REMOVE, "failure"),
    ]


def test_a_name_reserved_by_an_operator_then_refuses_signup(api, operator, client: Client):
    assert call(api, operator, ADD, name="moonbase").status_code == 200
    for taken in ("moonbase", "moonbase-club"):
        response = client.post(
            "/signup", {"email": f"{taken}@example.com", "username": taken, "password": PASSWORD}
        )
        assert response.status_code in (400, 422) and "reserved" in response.content.decode()
        assert not User.objects.filter(username=taken).exists()


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_two_operators_reserving_at_once_both_land():
    # Each change reads, merges and writes the one stored override: without a lock the second
    # writer would overwrite the first one's name.
    names = [f"launch-{n}" for n in range(8)]
    results = in_threads(
        *(
            (lambda name=name: usernames.add_reserved(name, by_stable_user_id="operator"))
            for name in names
        ),
        together=True,
    )
    assert not [r for r in results if isinstance(r, Exception)]
    override = usernames.read_override()
    assert override is not None and set(names) <= override.added
