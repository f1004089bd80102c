"""The artifact-push reconcile pass (seed 000's ``reconcile-artifacts-pushes``).

A safety net for pushes nobody followed with ``packagePublishExternalPush``. The normal pass
reads only pending package sources (``external_check_until`` in the future, set by a write
token mint) whose last check is five minutes old, keyset by id, within the lane's budget:

* HEAD equal to ``published_commit``: only the check time advances (and once the horizon has
  passed, that last check clears it);
* HEAD changed: published through the one publish function (a locked package, failing checks
  and non-fast-forwards leave everything untouched and are counted);
* no HEAD: the check time advances, the source stays pending.

In the 03:00 UTC window the same scan widens to every package source (the backstop) and
expired or revoked repo tokens are deleted.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.contrib.auth import get_user_model
from django.db.models import Q
from django.utils import timezone

from apps.packages.models import EntitySource, SavedPackage
from apps.packages.models.sources import EntityKind
from apps.packages.services import repo_tokens
from apps.packages.services.git import head
from apps.packages.services.publish import ALREADY, PUBLISHED, publish
from apps.packages.services.scope_grants import PackageScopeNotGranted
from kody.lanes import LaneRun
from kody.lanes.registry import Cadence, is_due

log = logging.getLogger(__name__)

CADENCE = timedelta(minutes=5)


def due_sources(now: datetime, *, backstop: bool):
    rows = EntitySource.objects.filter(entity_kind=EntityKind.PACKAGE)
    if backstop:
        return rows
    return rows.filter(external_check_until__gt=now).filter(
        Q(last_external_check_at__isnull=True) | Q(last_external_check_at__lte=now - CADENCE)
    )


def run(lane: LaneRun, now: datetime | None = None) -> None:
    now = now or timezone.now()
    backstop = is_due(Cadence.DAILY, now)
    if backstop:
        lane.count("backstop")
    after = ""
    while not lane.out_of_time():
        page = list(
            due_sources(now, backstop=backstop)
            .filter(id__gt=after)
            .order_by("id")[: lane.batch_size]
        )
        if not page:
            break
        for source in page:
            if lane.out_of_time():
                break
            after = source.id
            try:
                lane.count(check(source, now))
            except Exception:  # one bad source must not stop the pass
                log.exception("reconcile of source %s failed", source.id)
                lane.count("errors")
        lane.record(len(page))
        if len(page) < lane.batch_size:
            break
    if backstop:
        lane.count("tokens_revoked", repo_tokens.revoke_expired(limit=10_000))


def check(source: EntitySource, now: datetime) -> str:
    current = head(source.repo_id)
    if current is None:
        EntitySource.objects.filter(id=source.id).update(last_external_check_at=now)
        return "unresolved"
    if current == source.published_commit:
        settled = source.external_check_until is not None and source.external_check_until <= now
        fields = {"last_external_check_at": now}
        if settled:
            fields["external_check_until"] = None
        EntitySource.objects.filter(id=source.id, published_commit=current).update(**fields)
        return "unchanged"
    package = SavedPackage.objects.filter(user_id=source.user_id, source_id=source.id).first()
    owner = get_user_model().objects.filter(stable_user_id=source.user_id).first()
    if package is None or owner is None:
        return "orphaned"
    try:
        result = publish(owner, source, package, current)
    except PackageScopeNotGranted:
        return "rejected_scope_not_granted"
    if result.status == PUBLISHED:
        return "published"
    if result.status == ALREADY:
        return "already_published"
    return f"rejected_{result.reason or 'checks'}"
