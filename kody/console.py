"""The operator's console: the admin index organised by task, with counts that need attention.

The stock admin index lists every registered model alphabetically per app (about 120 rows);
operators think in tasks instead. The groups below name models by their lowercase label as
strings, so ``kody`` never imports an app. Counts that need attention come through
``register_attention``: each app registers its own counter from its ``admin.py`` (the same
registration seam the kernel uses elsewhere), and the kernel registers failed lanes itself.
The raw per-app tables stay reachable one level down at /admin/tables/.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import NoReverseMatch, reverse


@dataclass(frozen=True)
class Entry:
    title: str
    model: str  # "app_label.modelname"
    query: str = ""


@dataclass(frozen=True)
class Attention:
    key: str
    title: str
    model: str
    query: str
    count: Callable[[], int]


TASKS: tuple[tuple[str, tuple[Entry, ...]], ...] = (
    (
        "People",
        (
            Entry("Users", "accounts.user"),
            Entry("Platform accounts", "accounts.user", "account_type__exact=platform"),
            Entry("Paid plans", "accounts.user", "plan__in=standard,pro,max"),
            Entry("Suspended accounts", "accounts.user", "suspended_at__isnull=False"),
            Entry("Account deletions", "accounts.accountdeletion"),
            Entry("Usage by user", "entitlements.usagerollup"),
        ),
    ),
    (
        "Moderation",
        (
            Entry("Community reports", "community.communityreport"),
            Entry("Community bans", "community.communityban"),
            Entry("Platform feedback", "accounts.platformfeedback"),
        ),
    ),
    (
        "Mail",
        (
            Entry("System mail", "system_email.systememailmessage"),
            Entry("System mail delivery events", "system_email.systememaildeliveryevent"),
            Entry("Sender rules", "mailbox.emailsenderrule"),
            Entry("Delivery alerts", "mailbox.emaildeliveryalertevent"),
            Entry("Operator alert bursts", "system_email.operatoralert"),
        ),
    ),
    (
        "Billing",
        (
            Entry("Stripe webhook events", "entitlements.stripewebhookevent"),
            Entry("Compute overage invoices", "entitlements.computeoverageinvoice"),
            Entry("Referrals", "accounts.referral"),
        ),
    ),
    (
        "Platform",
        (
            Entry("Feature flags", "accounts.featureflag"),
            Entry("Site banners", "accounts.sitebanner"),
            Entry("Platform OAuth apps", "accounts.platformoauthapp"),
            Entry("Lanes", "kody.lanecontrol"),
            Entry("Audit log", "accounts.auditevent"),
        ),
    ),
)

_attention: dict[str, Attention] = {}


def register_attention(
    key: str, title: str, model: str, count: Callable[[], int], query: str = ""
) -> None:
    """An app declares one count operators should look at (zero means nothing to do)."""
    _attention[key] = Attention(key=key, title=title, model=model, query=query, count=count)


def _model_url(request: HttpRequest, label: str, query: str) -> str | None:
    """The changelist URL for a registered model the operator may view, else None."""
    for model, model_admin in admin.site._registry.items():
        if model._meta.label_lower != label:
            continue
        if not model_admin.has_view_permission(request):
            return None
        try:
            url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
        except NoReverseMatch:
            return None
        return f"{url}?{query}" if query else url
    return None


def task_groups(request: HttpRequest) -> list[dict[str, Any]]:
    groups = []
    for title, entries in TASKS:
        rows = []
        for entry in entries:
            url = _model_url(request, entry.model, entry.query)
            if url is not None:
                rows.append({"title": entry.title, "url": url})
        if rows:
            groups.append({"title": title, "entries": rows})
    return groups


def attention(request: HttpRequest) -> list[dict[str, Any]]:
    """Every registered count, in registration order; a counter that fails shows as unknown
    rather than taking the index down with it."""
    rows = []
    for item in _attention.values():
        try:
            count: int | None = int(item.count())
        except Exception:  # noqa: BLE001 - the index must render even when one source is down
            count = None
        rows.append(
            {
                "key": item.key,
                "title": item.title,
                "count": count,
                "url": _model_url(request, item.model, item.query),
            }
        )
    return rows


def _failed_lanes() -> int:
    from kody.lanes.models import LaneRunRecord

    return LaneRunRecord.objects.filter(consecutive_failures__gt=0).count()


register_attention("failed_lanes", "Failing lanes", "kody.lanecontrol", _failed_lanes)
