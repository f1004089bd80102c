"""Reserved usernames (``platform-settings:v1:reserved-usernames``) for operators: the admin
page and the ``adminReservedUsername*`` capabilities make the same change the same way.

Operators add a name (reserved exactly and as a substring root) or release one; the protected
system names (mail locals, ``kody…``) cannot be released. Every change is audit-first: the
intent row is written before the override is, so a change the audit trail cannot record does
not happen; the outcome row follows. The override records who made the change.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver, path

from apps.accounts import usernames
from apps.accounts.services import audit
from kody.errors import Conflict, InvalidInput

Action = Literal["add", "remove"]
AUDIT_ACTIONS: dict[Action, str] = {
    "add": "adminReservedUsernameAdd",
    "remove": "adminReservedUsernameRemove",
}
# Letters and digits joined by single hyphens or underscores (the reserved-name match strips
# both). An added name becomes a substring root, so it needs the username minimum; a release
# may name any built-in, the shortest of which is two characters.
TOKEN_PATTERN = r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$"
_TOKEN = re.compile(TOKEN_PATTERN)
MIN_LENGTH: dict[Action, int] = {"add": usernames.MIN_LENGTH, "remove": 2}
MAX_LENGTH = usernames.MAX_LENGTH


class ProtectedUsername(Conflict):
    code = "protected_username"
    message = "This is a protected system name and cannot be unreserved."


def clean_token(raw: str, action: Action) -> str:
    token = raw.strip().lower()
    if not (MIN_LENGTH[action] <= len(token) <= MAX_LENGTH and _TOKEN.match(token)):
        raise InvalidInput(
            f"A reserved name is {MIN_LENGTH[action]} to {MAX_LENGTH} letters or digits, "
            "joined by single hyphens or underscores.",
            details={"field": "name"},
        )
    return token


def change(action: Action, token: str, *, by_stable_user_id: str) -> usernames.Override:
    """Apply one change to the override (after the caller wrote its audit intent)."""
    if action == "add":
        return usernames.add_reserved(token, by_stable_user_id=by_stable_user_id)
    try:
        return usernames.remove_reserved(token, by_stable_user_id=by_stable_user_id)
    except ValueError as exc:
        raise ProtectedUsername(details={"name": token}) from exc


def view(override: usernames.Override | None) -> dict[str, Any]:
    return {
        "added": sorted(override.added) if override else [],
        "removed": sorted(override.removed) if override else [],
        "builtIn": sorted(usernames.BUILT_IN),
        "updatedAt": (override.updated_at or None) if override else None,
        "updatedBy": (override.updated_by or None) if override else None,
    }


class ReservedForm(forms.Form):
    name = forms.CharField(max_length=usernames.MAX_LENGTH)
    action = forms.ChoiceField(choices=[("add", "Reserve"), ("remove", "Release")])


def _post(request: HttpRequest, form: ReservedForm) -> None:
    action: Action = "add" if form.cleaned_data["action"] == "add" else "remove"
    try:
        token = clean_token(form.cleaned_data["name"], action)
    except InvalidInput as exc:
        messages.error(request, str(exc))
        return
    said = {
        "email": getattr(request.user, "email", None),
        "ip": request.META.get("REMOTE_ADDR"),
    }
    audit.record_first(
        action=AUDIT_ACTIONS[action], client_id=None, surface="admin", reason=token, **said
    )
    try:
        change(action, token, by_stable_user_id=str(getattr(request.user, "stable_user_id", "")))
    except ProtectedUsername as exc:
        outcome = "failure"
        messages.error(request, f"{token!r}: {exc}")
    else:
        outcome = "success"
        messages.success(request, f"{token!r}: {'reserved' if action == 'add' else 'released'}.")
    audit.record(
        category="admin",
        action=AUDIT_ACTIONS[action],
        result=outcome,
        path=f"admin:{AUDIT_ACTIONS[action]}",
        reason=token,
        **said,
    )


def reserved_usernames_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("accounts.change_user"):
        raise PermissionDenied
    form = ReservedForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        _post(request, form)
        return redirect(request.path)
    override = usernames.read_override()
    context = {
        **admin.site.each_context(request),
        "title": "Reserved usernames",
        "form": form,
        "added": sorted(override.added) if override else [],
        "removed": sorted(override.removed) if override else [],
        "built_in": sorted(usernames.BUILT_IN),
        "updated_at": override.updated_at if override else "",
    }
    return TemplateResponse(request, "admin/accounts/reserved_usernames.html", context)


def serve_at_site_root() -> None:
    """Serve the page at ``/admin/reserved-usernames/`` too (it also lives under the user list,
    which links to it): wraps the admin site's URLs, as ``kody.admin`` does for its pages."""
    site_urls = admin.site.get_urls

    def urls() -> list[URLPattern | URLResolver]:
        view = admin.site.admin_view(reserved_usernames_view)
        return [path("reserved-usernames/", view, name="reserved_usernames"), *site_urls()]

    admin.site.get_urls = urls  # type: ignore[method-assign]
