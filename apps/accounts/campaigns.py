"""Usage-state campaigns and the entitlement warning: the ``usage_entitlement_alert`` lane.

Each hourly run walks verified person accounts by stable id (a keyset cursor, bounded batches)
and derives one state from facts other apps keep, highest first:

* ``Paid``: the effective plan is above free (drip-silent).
* ``LimitAware``: today's charges reached 80 % of a daily limit (read from ``usage_events``
  after draining the usage buffer); these people get the entitlement-warning mail instead of
  a campaign mail, tips opt-out or not (it is about their account, not a tip).
* ``Activated``: a saved package and a second agent (the second-agent gift's stamp). Drip-silent
  except the one-shot advocate mail, at most once per person ever.
* ``Cooling``: once activated, no charge in 14 days. One mail, then ``cooling_terminal`` keeps
  the person silent for good (both ``ever_activated`` and ``cooling_terminal`` are sticky).
* ``PackagedSingleClient``, ``ConnectedNoPackage``, ``VerifiedNoMcp``: the onboarding steps.

A person's first evaluation only records the state (``origin = seed``, no mail). After that,
entering a state sends its one mail: the ``user_usage_campaign_sends`` row (unique per user,
state and send index; the advocate template unique per user) is inserted first and only the
run whose insert landed sends, so two concurrent runs mail once. The tips opt-out
(``services/tips.py``) silences the campaign mails, each of which carries a one-click
unsubscribe link and the RFC 8058 ``List-Unsubscribe`` headers. Mail goes from ``kody@``
through Django's mail backend.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db import IntegrityError, transaction
from django.db.models import Count, F
from django.db.models.functions import TruncDate
from django.utils import timezone

from apps.accounts.models import User, UserUsageCampaign
from apps.accounts.models.campaigns import (
    ADVOCATE_TEMPLATE,
    CampaignOrigin,
    CampaignState,
    UserUsageCampaignSend,
)
from apps.accounts.models.users import AccountType, Plan
from apps.accounts.services import tips
from apps.entitlements.models import UsageEvent
from apps.entitlements.plans import DAILY_RESOURCES, effective_plan_for, limit_for
from apps.entitlements.services import usage
from apps.packages.models import SavedPackage

log = logging.getLogger(__name__)

LIMIT_AWARE_SHARE = 0.8
LIMIT_AWARE_TOP = 15  # the most pressed people per run get the warning
COOLING_AFTER = timedelta(days=14)

WARNING_TEMPLATE = "entitlement_warning"
MAILS: dict[str, tuple[str, str, str]] = {
    # state -> (template, subject, body)
    CampaignState.VERIFIED_NO_MCP: (
        "connect_first_agent",
        "Connect your first agent to Kody",
        "Your Kody account is ready. Add Kody as an MCP server in your agent to start: "
        "{site}/account/connections",
    ),
    CampaignState.CONNECTED_NO_PACKAGE: (
        "save_first_package",
        "Save your first package",
        "Your agent is connected. Ask it to save something it wrote as a package, so every "
        "agent of yours can use it: {site}/account",
    ),
    CampaignState.PACKAGED_SINGLE_CLIENT: (
        "second_agent",
        "Use your packages from a second agent",
        "Your packages work from any agent you connect. Connect another one: "
        "{site}/account/connections",
    ),
    CampaignState.COOLING: (
        "cooling_checkin",
        "Your Kody packages are still here",
        "It has been a while. Your packages, memories and jobs are waiting: {site}/account",
    ),
    CampaignState.LIMIT_AWARE: (
        WARNING_TEMPLATE,
        "You are close to a Kody plan limit",
        "Today you used {used} of {limit} {resource}. See your usage and plans: "
        "{site}/account/usage",
    ),
}
TIPS_FOOTER = (
    "\n\n-- \nKody sends tips like this one to people with a Kody account. Stop them: "
    "{link}\nOr choose in your settings: {site}/account/settings#tips"
)
ADVOCATE = (
    ADVOCATE_TEMPLATE,
    "Enjoying Kody? Tell a friend",
    "Share your link and you both get more: {site}/?ref={username}",
)
SILENT = {CampaignState.PAID, CampaignState.ACTIVATED}


@dataclass(frozen=True)
class Pressure:
    resource: str
    used: int
    limit: int


@dataclass
class Pass:
    evaluated: int = 0
    mailed: int = 0
    changed: int = 0
    last_id: str = ""
    exhausted: bool = False  # the batch reached the last account


def _pressure(now: datetime) -> dict[str, Pressure]:
    """The ``LIMIT_AWARE_TOP`` people whose charges today reached 80 % of a daily limit."""
    usage.drain_buffer()
    start = datetime.combine(now.astimezone(UTC).date(), datetime.min.time(), tzinfo=UTC)
    rows = (
        UsageEvent.objects.filter(metric__in=DAILY_RESOURCES, occurred_at__gte=start)
        .annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .values("user_id", "metric")
        .annotate(n=Count("id"))
        .order_by("-n")[:500]
    )
    holders = {
        u.stable_user_id: u
        for u in User.objects.filter(stable_user_id__in={r["user_id"] for r in rows})
    }
    found: dict[str, tuple[float, Pressure]] = {}
    for row in rows:
        user = holders.get(row["user_id"])
        if user is None:
            continue
        limit = limit_for(effective_plan_for(user, now=now), row["metric"])
        share = row["n"] / limit if limit else 0.0
        if share >= LIMIT_AWARE_SHARE and share > found.get(user.stable_user_id, (0.0,))[0]:
            found[user.stable_user_id] = (share, Pressure(row["metric"], row["n"], limit))
    top = sorted(found.items(), key=lambda item: -item[1][0])[:LIMIT_AWARE_TOP]
    return {uid: pressure for uid, (_, pressure) in top}


def state_of(user: User, now: datetime, pressed: dict[str, Pressure], ever_activated: bool) -> str:
    uid = user.stable_user_id
    if effective_plan_for(user, now=now) != Plan.FREE:
        return CampaignState.PAID
    if uid in pressed:
        return CampaignState.LIMIT_AWARE
    packaged = SavedPackage.objects.filter(user_id=uid).exists()
    if packaged and user.second_agent_standard_gift_granted_at is not None:
        return CampaignState.ACTIVATED
    if (
        ever_activated
        and not UsageEvent.objects.filter(
            user_id=uid, occurred_at__gte=now - COOLING_AFTER
        ).exists()
    ):
        return CampaignState.COOLING
    if packaged:
        return CampaignState.PACKAGED_SINGLE_CLIENT
    if user.first_mcp_connected_at is not None:
        return CampaignState.CONNECTED_NO_PACKAGE
    return CampaignState.VERIFIED_NO_MCP


def _claim_send(uid: str, state: str, template: str, index: int) -> bool:
    """The ledger row first: True only for the run whose insert landed."""
    try:
        with transaction.atomic():
            UserUsageCampaignSend.objects.create(
                user_id=uid, state=state, template=template, send_index=index
            )
    except IntegrityError:
        return False
    return True


def _mail(user: User, template: tuple[str, str, str], **values: object) -> None:
    _, subject, body = template
    site = settings.SITE_URL.rstrip("/")
    text = body.format(site=site, username=user.username, **values)
    headers: dict[str, str] = {}
    if template[0] != WARNING_TEMPLATE:
        # Every tips mail says how to stop them, in the body and, for mail clients that offer
        # an unsubscribe button, as RFC 8058 one-click headers. The warning carries neither:
        # the opt-out does not stop it, so a link would promise what it cannot keep.
        link = tips.unsubscribe_url(site, user)
        text += TIPS_FOOTER.format(link=link, site=site)
        headers = {
            "List-Unsubscribe": f"<{link}>",
            "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
        }
    sender = f"Kody <kody@{settings.KODY_MAIL_DOMAIN}>"
    EmailMessage(subject, text, sender, [user.email], headers=headers).send()


def evaluate(user: User, now: datetime, pressed: dict[str, Pressure]) -> tuple[bool, int]:
    """(state changed, mails sent) for one person."""
    uid = user.stable_user_id
    row = UserUsageCampaign.objects.filter(user_id=uid).first()
    state = state_of(user, now, pressed, bool(row and row.ever_activated))
    if row is None:  # the first observation records without mailing
        UserUsageCampaign.objects.get_or_create(
            user_id=uid,
            defaults={
                "state": state,
                "entered_at": now,
                "last_evaluated_at": now,
                "origin": CampaignOrigin.SEED,
                "ever_activated": state == CampaignState.ACTIVATED,
                "first_activated_at": now if state == CampaignState.ACTIVATED else None,
            },
        )
        return True, 0
    changed = row.state != state
    activated_now = state == CampaignState.ACTIVATED and not row.ever_activated
    UserUsageCampaign.objects.filter(user_id=uid).update(
        state=state,
        entered_at=now if changed else row.entered_at,
        last_evaluated_at=now,
        origin=CampaignOrigin.EVENT if changed else row.origin,
        ever_activated=row.ever_activated or state == CampaignState.ACTIVATED,
        first_activated_at=row.first_activated_at or (now if activated_now else None),
    )
    return changed, _send_for(user, row, state, now, pressed) if changed else 0


def _send_for(
    user: User, row: UserUsageCampaign, state: str, now: datetime, pressed: dict[str, Pressure]
) -> int:
    uid = user.stable_user_id
    if state == CampaignState.LIMIT_AWARE:
        p = pressed[uid]
        return _send(
            user, state, MAILS[state], now, used=p.used, limit=p.limit, resource=p.resource
        )
    if tips.is_opted_out(user) or row.cooling_terminal:
        return 0
    if state == CampaignState.ACTIVATED and row.advocate_sent_at is None:
        sent = _send(user, state, ADVOCATE, now)
        if sent:
            UserUsageCampaign.objects.filter(user_id=uid).update(advocate_sent_at=now)
        return sent
    if state in SILENT or state not in MAILS:
        return 0
    sent = _send(user, state, MAILS[state], now)
    if state == CampaignState.COOLING:
        UserUsageCampaign.objects.filter(user_id=uid).update(cooling_terminal=True)
    return sent


def _send(
    user: User, state: str, template: tuple[str, str, str], now: datetime, **values: object
) -> int:
    # Campaign mails go once per state; the warning at most once per UTC day.
    index = now.astimezone(UTC).date().toordinal() if state == CampaignState.LIMIT_AWARE else 0
    if not _claim_send(user.stable_user_id, state, template[0], index):
        return 0
    try:
        _mail(user, template, **values)
    except Exception:  # the ledger keeps the once-only promise; a lost mail is logged
        log.exception("campaign mail %s not sent", template[0])
        return 0
    UserUsageCampaign.objects.filter(user_id=user.stable_user_id).update(
        send_count=F("send_count") + 1, last_sent_at=now
    )
    return 1


def sweep(
    after: str, batch: int, out_of_time: Callable[[], bool], now: datetime | None = None
) -> Pass:
    """One batch of verified person accounts after the stable id ``after``."""
    now = now or timezone.now()
    people = list(
        User.objects.filter(
            account_type=AccountType.PERSON,
            email_verified_at__isnull=False,
            deleting_at__isnull=True,
            suspended_at__isnull=True,
            stable_user_id__gt=after,
        ).order_by("stable_user_id")[:batch]
    )
    done = Pass(exhausted=len(people) < batch)
    pressed = _pressure(now) if people else {}
    for user in people:
        if out_of_time():
            done.exhausted = False
            break
        changed, mailed = evaluate(user, now, pressed)
        done.evaluated += 1
        done.changed += int(changed)
        done.mailed += mailed
        done.last_id = user.stable_user_id
    return done
