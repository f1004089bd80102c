"""The public pages answer without a session, cache for a CDN, redirect renamed users and
kody ids, render readmes inert, and stop serving a delisted listing's icon."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from django.test import Client

from apps.accounts.models.identity import UsernameRedirect
from apps.community.markdown import render
from tests.community.conftest import package_files, publish_package

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

EVIL = (
    "# Hello\n\n<script>alert('x')</script>\n\n"
    '<img src=x onerror="alert(1)">\n\n[click](javascript:alert(2))\n\n**bold** `code`\n'
)


class Elements(HTMLParser):
    """Every element and attribute a browser would build from the HTML."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str]] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += [(k, v or "") for k, v in attrs]


def test_markdown_with_script_tags_renders_inert():
    html = render(EVIL + '\n<a href="https://ok.example">fine</a> [ok](https://ok.example)\n')
    found = Elements(html)
    assert {"h1", "strong", "code", "a"} <= set(found.tags)
    assert "script" not in found.tags and "img" not in found.tags
    assert not [k for k, _ in found.attributes if k.startswith("on")]
    assert all(v.startswith("https://") for k, v in found.attributes if k == "href")
    assert "&lt;script&gt;" in html  # shown as text, not run


def test_the_three_pages_answer_anonymously_with_cdn_headers(as_owner):
    listing = publish_package(as_owner, readme=EVIL)
    anon = Client()
    for path in ("/community", "/@ada", "/@ada/greeter", "/community?q=greeter&category=examples"):
        response = anon.get(path)
        assert response.status_code == 200, path
        assert "public" in response["Cache-Control"] and "s-maxage=300" in response["Cache-Control"]
    page = anon.get("/@ada/greeter").content.decode()
    assert "@ada/greeter" in page and listing["id"] in page and "communityFork" in page
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    assert "/@ada/greeter" in anon.get("/community?q=greeter").content.decode()

    icon = anon.get(f"/community/icons/{listing['id']}")
    assert icon.status_code == 200 and icon["Content-Type"] == "image/webp"
    assert "max-age=3600" in icon["Cache-Control"]
    assert (
        anon.get(f"/community/icons/{listing['id']}", HTTP_IF_NONE_MATCH=icon["ETag"]).status_code
        == 304
    )


def test_a_signed_in_visitors_page_is_private(as_owner, outsider_client):
    publish_package(as_owner)
    response = outsider_client.get("/@ada/greeter")
    assert response.status_code == 200 and "private" in response["Cache-Control"]


def test_renamed_users_and_kody_ids_redirect_permanently(as_owner, owner):
    listing = publish_package(as_owner)
    as_owner.call(
        "packageSave", files=package_files(name="welcomer"), packageId=listing["packageId"]
    )
    as_owner.call("communityPublish", packageId=listing["packageId"])
    anon = Client()
    moved = anon.get("/@ada/greeter")
    assert moved.status_code == 301 and moved["Location"] == "/@ada/welcomer"

    UsernameRedirect.objects.create(old_username="lovelace", user_id=owner.stable_user_id)
    assert anon.get("/@lovelace")["Location"] == "/@ada"
    assert anon.get("/@lovelace/welcomer")["Location"] == "/@ada/welcomer"
    assert anon.get("/@lovelace").status_code == 301
    assert anon.get("/@nobody").status_code == 404
    assert anon.get("/@ada/nothing").status_code == 404


def test_delisted_listings_have_no_page_and_no_icon(as_owner, as_outsider):
    listing = publish_package(as_owner)
    as_owner.call("communityUnpublish", listingId=listing["id"])
    anon = Client()
    assert anon.get("/@ada/greeter").status_code == 404
    assert anon.get(f"/community/icons/{listing['id']}").status_code == 404
    assert "@ada/greeter" not in anon.get("/@ada").content.decode()


def test_a_private_profile_page_hides_its_listings(as_owner):
    publish_package(as_owner)
    as_owner.call("communityProfileUpdate", visibility="private", bio="hello there")
    page = Client().get("/@ada").content.decode()
    assert "This profile is private." in page and "hello there" in page
    assert "@ada/greeter" not in page
    assert Client().get("/@ada/greeter").status_code == 200
