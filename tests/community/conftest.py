"""Community tests call capabilities as the shared cast plus a third person, ``cy``, over the
REST surface (the packages tests' ``Agent``)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from apps.accounts.models import User
from tests.accounts.factories import UserFactory
from tests.packages.conftest import Agent


@pytest.fixture
def as_owner(owner: User) -> Agent:
    return Agent(owner)


@pytest.fixture
def as_outsider(outsider: User) -> Agent:
    return Agent(outsider)


@pytest.fixture
def third(db: None) -> User:
    return UserFactory(username="cy")


@pytest.fixture
def as_third(third: User) -> Agent:
    return Agent(third)


@pytest.fixture
def as_operator(operator: User) -> Agent:
    return Agent(operator)


@pytest.fixture(autouse=True)
def _inline_actors(settings: Any) -> None:
    settings.KODY_ACTORS_INLINE = True


def package_files(
    username: str = "ada",
    name: str = "greeter",
    *,
    description: str = "Greets people politely.",
    tags: tuple[str, ...] = ("examples",),
    readme: str = "# Greeter\n\nSays hello.\n",
    license: str | None = "MIT",
) -> dict[str, str]:
    manifest: dict[str, Any] = {
        "name": f"@{username}/{name}",
        "exports": {".": "./mod.ts"},
        "kody": {"description": description, "tags": list(tags)},
    }
    if license:
        manifest["license"] = license
    return {
        "package.json": json.dumps(manifest),
        "README.md": readme,
        "mod.ts": "export function greet(name: string): string {\n  return `hi ${name}`;\n}\n",
    }


def publish_package(agent: Agent, **kw: Any) -> dict[str, Any]:
    """Save a package and list it; returns the communityPublish reply's listing."""
    kw.setdefault("username", agent.user.username)
    package = agent.call("packageSave", files=package_files(**kw))["package"]
    listing = agent.call("communityPublish", packageId=package["id"])["listing"]
    return {**listing, "packageId": package["id"]}
