"""The admin page for reserved usernames (``platform-settings:v1:reserved-usernames``).

Operators add a name (reserved exactly and as a substring root) or release one; the built-in
list and the protected system names (mail locals, ``kody…``) cannot be released. Every change
is audited and records who made it in the override itself.
"""

from __future__ import annotations

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse

from apps.accounts import usernames
from apps.accounts.services import audit


class ReservedForm(forms.Form):
    name = forms.CharField(max_length=usernames.MAX_LENGTH)
    action = forms.ChoiceField(choices=[("add", "Reserve"), ("remove", "Release")])


def reserved_usernames_view(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("accounts.change_user"):
        raise PermissionDenied
    form = ReservedForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        name, action = form.cleaned_data["name"].strip().lower(), form.cleaned_data["action"]
        by = str(getattr(request.user, "stable_user_id", ""))
        try:
            if action == "add":
                usernames.add_reserved(name, by_stable_user_id=by)
            else:
                usernames.remove_reserved(name, by_stable_user_id=by)
        except ValueError as exc:
            messages.error(request, str(exc))
        else:
            audit.record(
                category="admin",
                action=f"reserved_username_{action}",
                result="success",
                email=getattr(request.user, "email", None),
                ip=request.META.get("REMOTE_ADDR"),
                path=request.path,
                reason=name,
            )
            messages.success(request, f"{name!r}: {'reserved' if action == 'add' else 'released'}.")
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
