"""Signing in and out: the credential check under per-account and per-IP failure budgets,
and the audit rows of both."""

from __future__ import annotations

import logging

from django.contrib.auth import authenticate
from django.core.cache import cache
from django.db import models

from apps.accounts import policy
from apps.accounts.models import (
    User,
)
from apps.accounts.services import audit
from apps.accounts.services.identity_rules import AccountSuspended, InvalidCredentials
from kody.errors import AccountDeleting, RateLimited

logger = logging.getLogger(__name__)

LOGIN_MAX_FAILURES = 10  # per account (or unknown identifier)
LOGIN_MAX_IP_FAILURES = 50  # per client IP, across every identifier it tries
LOGIN_WINDOW_SECONDS = 15 * 60


def _login_keys(account: User | None, ident: str, ip: str | None) -> list[tuple[str, int]]:
    """The budgets one attempt draws on: the account (however it was named, or the identifier
    when no account matches) and the client IP (however many accounts it tries)."""
    who = f"account:{account.pk}" if account is not None else f"identifier:{ident}"
    keys = [("identity:login-fail:" + audit.keyed_hash(who), LOGIN_MAX_FAILURES)]
    if ip:
        keys.append(("identity:login-fail:" + audit.keyed_hash(f"ip:{ip}"), LOGIN_MAX_IP_FAILURES))
    return keys


def _failures(key: str) -> int:
    try:
        return int(cache.get(key) or 0)
    except Exception:  # noqa: BLE001 — fail open on a cache outage; the password check still runs
        logger.warning("login rate-limit cache unavailable")
        return 0


def _count_failure(key: str) -> None:
    try:
        cache.add(key, 0, timeout=LOGIN_WINDOW_SECONDS)
        cache.incr(key)
    except Exception:  # noqa: BLE001
        logger.warning("login rate-limit cache unavailable")


def authenticate_login(
    identifier: str, password: str, *, ip: str | None = None, path: str | None = None
) -> User:
    """Check credentials (username or email) under a per-account and a per-IP failure budget.

    The one sign-in check for the account UI and ``/admin/login/``; every outcome is audited.
    """
    ident = identifier.strip().lower()
    account = User.objects.filter(
        models.Q(email=ident) if "@" in ident else models.Q(username__iexact=ident)
    ).first()
    email = account.email if account else (ident if "@" in ident else None)
    keys = _login_keys(account, ident, ip)

    def refuse(result: str, reason: str | None) -> None:
        audit.record(
            category="auth",
            action="login",
            result=result,
            email=email,
            ip=ip,
            path=path,
            reason=reason,
        )

    if any(_failures(key) >= limit for key, limit in keys):
        refuse("rate_limited", None)
        raise RateLimited("Too many failed sign-in attempts. Wait 15 minutes and try again.")
    # Unknown identifiers still go through authenticate(), which runs a dummy hash so response
    # time does not reveal whether the account exists.
    user = authenticate(username=account.username if account else ident, password=password)
    if user is None:
        for key, _ in keys:
            _count_failure(key)
        refuse("failure", "invalid_credentials")
        raise InvalidCredentials("That email/username and password do not match.")
    if policy.is_deleting(user):
        refuse("failure", "account_deleting")
        raise AccountDeleting("This account is being deleted.")
    if not policy.may_act(user):
        refuse("failure", "account_suspended")
        raise AccountSuspended()
    cache.delete(keys[0][0])
    audit.record(
        category="auth", action="login", result="success", email=user.email, ip=ip, path=path
    )
    return user


def record_logout(user: User, *, ip: str | None = None) -> None:
    audit.record(category="auth", action="logout", result="success", email=user.email, ip=ip)
