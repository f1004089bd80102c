"""Admin base classes every app's ``admin.py`` shares."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest


class ReadOnlyModelAdmin(admin.ModelAdmin):
    """View-only admin for data whose truth is written elsewhere (ledgers, indexes, audit).

    Every concrete column except ``exclude`` is shown read-only, so credential columns listed
    in ``exclude`` never render on the detail page either."""

    allow_delete = False

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.allow_delete and super().has_delete_permission(request, obj)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        hidden = set(self.exclude or ())
        return [f.name for f in self.model._meta.concrete_fields if f.name not in hidden]


class NoAddModelAdmin(admin.ModelAdmin):
    """Rows that carry a credential are minted by services, never typed into a form."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False
