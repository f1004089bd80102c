"""The ``operators`` group: what a ``create_user --staff`` operator may do in ``/admin/``.

View every model; change only the moderation and support models below; add nothing else and
delete nothing. Credential columns (hashes, secrets, ciphertexts) are never rendered by any
admin (see ``apps/accounts/admin.py``), and no model holding them is changeable here. Full
rights are ``--superuser``. The group is created by migration ``accounts.0004`` and re-synced
after every ``migrate`` so a model added later is viewable too.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Q

GROUP = "operators"

# (app_label, model): moderation (community listings, reports, bans) and support (feedback,
# the site banner).
CHANGE = (
    ("community", "communitylisting"),
    ("community", "communityreport"),
    ("community", "communityban"),
    ("accounts", "platformfeedback"),
    ("accounts", "sitebanner"),
)
ADD = (("community", "communityban"),)


def _perm(action: str, models: tuple[tuple[str, str], ...]) -> Q:
    query = Q(pk__in=[])
    for app_label, model in models:
        query |= Q(
            codename=f"{action}_{model}",
            content_type__app_label=app_label,
            content_type__model=model,
        )
    return query


def sync_group(apps: Any) -> Any:
    """Create or refresh the group with ``apps`` (the live registry or a migration's)."""
    group_model = apps.get_model("auth", "Group")
    permission = apps.get_model("auth", "Permission")
    group, _ = group_model.objects.get_or_create(name=GROUP)
    wanted = permission.objects.filter(
        Q(codename__startswith="view_") | _perm("change", CHANGE) | _perm("add", ADD)
    )
    group.permissions.set(wanted)
    return group


def on_post_migrate(sender: Any, **kwargs: Any) -> None:
    # Imported here: this module is imported while the app registry is still loading.
    from django.apps import apps as live_apps

    # post_migrate is sent once per app, and auth creates each app's permissions on its own
    # turn: sync once, on the last app's turn, when every permission exists.
    last = list(live_apps.get_app_configs())[-1]
    if sender.name != last.name or kwargs.get("using", "default") != "default":
        return
    registry = kwargs.get("apps") or live_apps
    # A test limited to some apps (available_apps) flushes and re-sends post_migrate without
    # django.contrib.auth: there is no group to keep then.
    if not live_apps.is_installed("django.contrib.auth"):
        return
    sync_group(registry)
