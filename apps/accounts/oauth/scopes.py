"""OAuth scopes are the capability domains, exactly what a token's ``scopes`` hold today."""

from __future__ import annotations

from typing import Any

from kody.capabilities import all_capabilities
from kody.discovery import autodiscover

DESCRIPTIONS = {
    "account": "your account: who you are, usage, export, tokens",
    "admin": "operator tools (only for operators)",
    "email": "read and send mail from your Kody inbox",
    "integrations": "connect other services with OAuth and use those connections",
    "jobs": "schedule and run jobs",
    "meta": "search, memories and Kody itself",
    "openapi": "bind other services' APIs from their OpenAPI specs",
    "runs": "job run history",
    "secrets": "use and manage your secrets",
    "storage": "your storage",
    "values": "your stored values",
}


def domains() -> list[str]:
    autodiscover()
    return sorted({cap.domain for cap in all_capabilities()})


class CapabilityDomainScopes:
    def get_all_scopes(self) -> dict[str, str]:
        return {domain: DESCRIPTIONS.get(domain, domain) for domain in domains()}

    def get_available_scopes(
        self, application: Any = None, request: Any = None, *a: Any, **k: Any
    ) -> list[str]:
        return domains()

    def get_default_scopes(
        self, application: Any = None, request: Any = None, *a: Any, **k: Any
    ) -> list[str]:
        return domains()
