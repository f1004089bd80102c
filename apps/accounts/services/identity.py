"""Identity actions: signup, email verification, password reset, email change, login.

Design note — the invariants kept here:

* ``users.stable_user_id`` is minted once at signup (SHA-256 of the normalized email, or a fresh
  random-derived id when that value is already taken by an account that has since changed its
  email) and is never rewritten.
* Emails are claims on an identity (``user_email_claims``). The current address holds a live
  claim; after an email change the former verified address keeps its claim until the owner
  confirms its release from that mailbox. A signup with an address claimed by someone else is a
  409 ``former_email_claimed`` that names no other address.
* One-time links carry a random token; only its SHA-256 is stored. Consuming a token deletes its
  row under a row lock, so a token works once, and expired tokens never work.
* Once ``users.deleting_at`` is set, every mutation is refused (``assert_can_mutate``); identity
  mutations re-read the user row ``FOR UPDATE`` so a concurrent deletion fence is seen.
* Mail goes out after commit; audit rows are written after the state change (best-effort).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta

from django.apps import apps as django_apps
from django.contrib.auth.hashers import make_password
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.accounts import operators, policy
from apps.accounts.models import (
    EmailVerification,
    PasswordReset,
    PendingEmailChange,
    PendingEmailClaimRelease,
    User,
    UserEmailClaim,
)
from apps.accounts.models.identity import EmailClaimStatus
from apps.accounts.models.users import AccountType, normalize_email
from apps.accounts.services import audit, onetime, referrals

# The rules and the sign-in live beside this module; named here too, as callers use them.
from apps.accounts.services.identity_rules import (  # noqa: E402, F401
    AccountSuspended,
    EmailNotVerified,
    EmailTaken,
    EmailUnavailable,
    FormerEmailClaimed,
    InvalidCredentials,
    UsernameReserved,
    UsernameTaken,
    _claim,
    _claimed_by_other,
    _field_error,
    _lock_user,
    _mint_stable_user_id,
    assert_can_mutate,
    clean_email,
    clean_password,
    clean_username,
    refuses_deleting,
)
from apps.accounts.services.login import (  # noqa: E402, F401
    LOGIN_MAX_FAILURES,
    LOGIN_MAX_IP_FAILURES,
    LOGIN_WINDOW_SECONDS,
    authenticate_login,
    record_logout,
)
from apps.accounts.services.onetime import InvalidToken, TokenExpired
from kody.errors import (  # noqa: F401  (AccountDeleting: callers catch identity.AccountDeleting)
    AccountDeleting,
    InvalidInput,
    KodyError,
    RateLimited,
)

logger = logging.getLogger(__name__)

VERIFY_TTL = timedelta(hours=24)
RESET_TTL = timedelta(hours=1)
SET_PASSWORD_TTL = timedelta(hours=24)
EMAIL_CHANGE_TTL = timedelta(hours=24)


# --- verification mail outcome -----------------------------------------------------------------


def _record_verification_mail(user_id: int) -> Callable[[Exception | None], None]:
    """Keep the latest verify-mail outcome on the user so support can see why none arrived."""

    def record(error: Exception | None) -> None:
        User.objects.filter(pk=user_id).update(
            verification_email_status="failed" if error else "sent",
            verification_email_status_at=timezone.now(),
            verification_email_error=type(error).__name__ if error else None,
        )

    return record


# --- signup and verification --------------------------------------------------------------------


def signup(
    *,
    email: str,
    username: str,
    password: str,
    ip: str | None = None,
    path: str | None = None,
    referrer: str | None = None,
) -> User | None:
    """Create an account and mail its verification link.

    An address that already has an account gets exactly the answer a new one gets (``None``
    instead of the user, which no surface shows); its owner is mailed instead, so signup does
    not reveal who has an account here.
    """
    try:
        user = _signup(email=email, username=username, password=password, referrer=referrer)
    except EmailTaken:
        make_password(password)  # spend the hashing time a new account would have
        audit.record(
            category="account",
            action="signup",
            result="failure",
            email=email or None,
            ip=ip,
            path=path,
            reason="email_taken",
        )
        _mail_existing_owner(normalize_email(email))
        return None
    except KodyError as exc:
        audit.record(
            category="account",
            action="signup",
            result="failure",
            email=email or None,
            ip=ip,
            path=path,
            reason=exc.code,
        )
        raise
    audit.record(
        category="account", action="signup", result="success", email=user.email, ip=ip, path=path
    )
    return user


def _signup(*, email: str, username: str, password: str, referrer: str | None = None) -> User:
    email = clean_email(email)
    username = clean_username(username)
    clean_password(password, User(username=username, email=email))
    try:
        with transaction.atomic():
            _check_available(email, username)
            user = User.objects.create_user(
                username=username,
                email=email,
                password=password,
                stable_user_id=_mint_stable_user_id(email),
            )
            _claim(user, email)
            referrals.attribute(user, referrer)
            _send_verification(user)
    except IntegrityError:
        # Lost a race with a concurrent signup: report what is now taken.
        _check_available(email, username)
        raise
    return user


def provision(
    *,
    email: str,
    username: str,
    password: str | None = None,
    staff: bool = False,
    superuser: bool = False,
    platform: bool = False,
) -> User:
    """Operator-created account (``manage.py create_user``): verified at once, since the
    operator vouches for the address; without a password it signs in after a set-password link
    (``set_password_link``). Staff join the ``operators`` group; a superuser has every right."""
    email = clean_email(email)
    username = clean_username(username, official=platform)
    if password is not None:
        clean_password(password, User(username=username, email=email))
    with transaction.atomic():
        _check_available(email, username)
        user = User.objects.create_user(
            account_type=AccountType.PLATFORM if platform else AccountType.PERSON,
            username=username,
            email=email,
            password=password,
            stable_user_id=_mint_stable_user_id(email),
            is_staff=staff or superuser,
            is_superuser=superuser,
            email_verified_at=timezone.now(),
        )
        _claim(user, email)
        if staff and not superuser:
            user.groups.add(operators.sync_group(django_apps))
    audit.record(
        category="admin",
        action="user_create",
        result="success",
        email=email,
        reason="superuser" if superuser else "staff" if staff else None,
    )
    return user


def set_password_link(user: User) -> str:
    """A one-time link that sets the account's password (valid ``SET_PASSWORD_TTL``)."""
    with transaction.atomic():
        PasswordReset.objects.filter(user=user).delete()
        token = onetime.issue(PasswordReset, user, SET_PASSWORD_TTL)
    return onetime.link("/reset-password/confirm", token)


def _mail_existing_owner(email: str) -> None:
    if not onetime.within_hourly_budget("signup-existing", email):
        return
    onetime.mail_after_commit(
        email,
        "Someone tried to sign up to Kody with your address",
        "Someone (perhaps you) tried to create a Kody account with this email address, which "
        "already has one.\n\n"
        f"To sign in: {onetime.site_link('/login')}\n"
        f"Forgot your password? {onetime.site_link('/reset-password')}\n\n"
        "If it was not you, you can ignore this mail: nothing changed on your account.",
    )


def _check_available(email: str, username: str) -> None:
    if User.objects.filter(email=email).exists():
        raise _field_error("email", "An account with this email already exists.", EmailTaken)
    if _claimed_by_other(email, None):
        raise _field_error(
            "email",
            "This address still belongs to an existing account as a former email. "
            "Its owner can release it from their account settings.",
            FormerEmailClaimed,
        )
    if User.objects.filter(username__iexact=username).exists():
        raise _field_error("username", "That username is taken.", UsernameTaken)


def _send_verification(user: User) -> None:
    EmailVerification.objects.filter(user=user).delete()
    token = onetime.issue(EmailVerification, user, VERIFY_TTL)
    onetime.mail_after_commit(
        user.email,
        "Verify your Kody email address",
        "Confirm this address for your Kody account "
        f"({user.username}) by opening:\n\n{onetime.link('/verify', token)}\n\n"
        "The link works once and expires in 24 hours. If you did not sign up, ignore this mail.",
        on_result=_record_verification_mail(user.pk),
    )


@refuses_deleting
def resend_verification(user: User) -> bool:
    """Send a fresh verification link; False when already verified or over the hourly budget."""
    if user.email_verified_at is not None:
        return False
    if not onetime.within_hourly_budget("verify", user.stable_user_id):
        raise RateLimited("Too many verification emails. Try again in an hour.")
    with transaction.atomic():
        _send_verification(_lock_user(user.pk))
    return True


def verify_email(token: str, *, ip: str | None = None) -> User:
    row = onetime.consume(EmailVerification, token)
    with transaction.atomic():
        user = _lock_user(row.user_id)
        if user.email_verified_at is None:
            user.email_verified_at = timezone.now()
            user.save(update_fields=["email_verified_at", "updated_at"])
        _claim(user, user.email)
    referrals.release_held(user)  # a referral reward held while the address was unverified
    audit.record(
        category="account", action="verify_email", result="success", email=user.email, ip=ip
    )
    return user


# --- password reset -----------------------------------------------------------------------------


def request_password_reset(email: str, *, ip: str | None = None) -> None:
    """Mail a reset link when the address belongs to an account that may act; silent either way
    (a suspended or deleting account gets no link, and the answer does not say so)."""
    email = clean_email(email)
    user = User.objects.filter(email=email).first()
    if user is not None and not policy.may_act(user):
        user = None
    if user is None or not onetime.within_hourly_budget("reset", email):
        audit.record(
            category="auth",
            action="password_reset_request",
            result="failure",
            email=email,
            ip=ip,
            reason="unknown_or_throttled",
        )
        return
    with transaction.atomic():
        PasswordReset.objects.filter(user=user).delete()
        token = onetime.issue(PasswordReset, user, RESET_TTL)
        onetime.mail_after_commit(
            user.email,
            "Reset your Kody password",
            f"Choose a new password for {user.username}:\n\n"
            f"{onetime.link('/reset-password/confirm', token)}\n\n"
            "The link works once and expires in one hour. If you did not ask, ignore this mail.",
        )
    audit.record(
        category="auth", action="password_reset_request", result="success", email=email, ip=ip
    )


def check_reset_token(token: str) -> None:
    """Raise when the token cannot be used, without consuming it (for the GET form)."""
    row = PasswordReset.objects.filter(token_hash=onetime.token_hash(token or "")).first()
    if row is None:
        raise InvalidToken("This link is not valid or was already used. Request a new one.")
    if row.expires_at <= timezone.now():
        raise TokenExpired("This link has expired. Request a new one.")


def reset_password(token: str, password: str, *, ip: str | None = None) -> User:
    check_reset_token(token)
    row = (
        PasswordReset.objects.select_related("user")
        .filter(token_hash=onetime.token_hash(token))
        .first()
    )
    if row is None:
        raise InvalidToken("This link is not valid or was already used. Request a new one.")
    if not policy.may_act(row.user):
        raise AccountSuspended("This account cannot reset its password now. Contact support.")
    # Validate before consuming so a weak password does not burn the link.
    clean_password(password, row.user)
    row = onetime.consume(PasswordReset, token)
    with transaction.atomic():
        user = _lock_user(row.user_id)
        user.set_password(password)
        user.password_changed_at = timezone.now()
        user.save(update_fields=["password", "password_changed_at", "updated_at"])
        PasswordReset.objects.filter(user=user).delete()
    audit.record(
        category="auth", action="password_reset", result="success", email=user.email, ip=ip
    )
    return user


# --- email change and claim release -------------------------------------------------------------


@refuses_deleting
def request_email_change(
    user: User, new_email: str, password: str, *, ip: str | None = None
) -> None:
    if user.email_verified_at is None:
        raise EmailNotVerified("Verify your current email address before changing it.")
    if not user.check_password(password):
        raise _field_error("password", "That password is not correct.", InvalidCredentials)
    new_email = clean_email(new_email, "new_email")
    if new_email == user.email:
        raise _field_error("new_email", "That is already your email address.")
    if not onetime.within_hourly_budget("email-change", user.stable_user_id):
        raise RateLimited("Too many email change requests. Try again in an hour.")
    with transaction.atomic():
        locked = _lock_user(user.pk)
        _require_available(new_email, locked.pk)
        PendingEmailChange.objects.filter(user=locked).delete()
        PendingEmailChange.objects.filter(
            new_email=new_email, expires_at__lte=timezone.now()
        ).delete()
        if PendingEmailChange.objects.filter(new_email=new_email).exists():
            raise _field_error("new_email", "That address is not available.", EmailUnavailable)
        token = onetime.issue(PendingEmailChange, locked, EMAIL_CHANGE_TTL, new_email=new_email)
        onetime.mail_after_commit(
            new_email,
            "Confirm your new Kody email address",
            f"Confirm {new_email} as the email for {locked.username}:\n\n"
            f"{onetime.link('/account/email/confirm', token)}\n\nThe link expires in 24 hours.",
        )
        onetime.mail_after_commit(
            locked.email,
            "Your Kody email address is being changed",
            "Someone signed in to your account asked to change its email address. If this was "
            "not you, change your password now.",
        )
    audit.record(
        category="account", action="email_change_request", result="success", email=user.email, ip=ip
    )


def _require_available(email: str, user_id: int) -> None:
    taken = User.objects.filter(email=email).exclude(pk=user_id).exists()
    if taken or _claimed_by_other(email, user_id):
        raise _field_error("new_email", "That address is not available.", EmailUnavailable)


def confirm_email_change(token: str, *, ip: str | None = None) -> User:
    row = onetime.consume(PendingEmailChange, token)
    with transaction.atomic():
        user = _lock_user(row.user_id)
        if user.email_verified_at is None:
            raise EmailNotVerified("Verify your current email address before changing it.")
        _require_available(row.new_email, user.pk)
        former = user.email
        _claim(user, former)  # the former verified address stays claimed
        _claim(user, row.new_email)
        user.email = row.new_email
        user.email_verified_at = timezone.now()
        user.save(update_fields=["email", "email_verified_at", "updated_at"])
        EmailVerification.objects.filter(user=user).delete()
        PasswordReset.objects.filter(user=user).delete()
    audit.record(category="account", action="email_change", result="success", email=former, ip=ip)
    return user


def former_emails(user: User) -> list[str]:
    return list(
        UserEmailClaim.objects.filter(user=user, status=EmailClaimStatus.CLAIMED)
        .exclude(email=user.email)
        .order_by("email")
        .values_list("email", flat=True)
    )


@refuses_deleting
def request_claim_release(user: User, email: str, *, ip: str | None = None) -> None:
    """Mail the former address a link; opening it releases the claim (proves it is still theirs)."""
    email = normalize_email(email)
    if email not in former_emails(user):
        raise _field_error("email", "That is not one of your former addresses.", InvalidInput)
    if not onetime.within_hourly_budget("claim-release", user.stable_user_id):
        raise RateLimited("Too many release requests. Try again in an hour.")
    with transaction.atomic():
        locked = _lock_user(user.pk)
        PendingEmailClaimRelease.objects.filter(user=locked, email=email).delete()
        token = onetime.issue(PendingEmailClaimRelease, locked, EMAIL_CHANGE_TTL, email=email)
        onetime.mail_after_commit(
            email,
            "Release this address from your Kody account",
            f"Open this link to release {email} so it can be used for another account:\n\n"
            f"{onetime.link('/account/email/release', token)}\n\nThe link expires in 24 hours.",
        )
    audit.record(
        category="account",
        action="email_claim_release_request",
        result="success",
        email=email,
        ip=ip,
    )


def confirm_claim_release(token: str, *, ip: str | None = None) -> None:
    row = onetime.consume(PendingEmailClaimRelease, token)
    with transaction.atomic():
        user = _lock_user(row.user_id)
        if row.email == user.email:
            raise InvalidToken("The current login address cannot be released.")
        UserEmailClaim.objects.filter(user=user, email=row.email).update(
            status=EmailClaimStatus.RELEASED, released_at=timezone.now()
        )
    audit.record(
        category="account", action="email_claim_release", result="success", email=row.email, ip=ip
    )


# --- preferences ----------------------------------------------------------------------------


@refuses_deleting
def set_experiments_opt_in(user: User, enabled: bool) -> User:
    with transaction.atomic():
        locked = _lock_user(user.pk)
        locked.experiments_opt_in = enabled
        locked.save(update_fields=["experiments_opt_in", "updated_at"])
    return locked
