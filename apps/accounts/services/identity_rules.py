"""The rules every identity action keeps: its errors, the deletion fence, and how an email,
username or password is checked and an email claimed. Shared by ``identity`` and ``login``."""

from __future__ import annotations

import functools
import hashlib
import secrets
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from django.core.validators import validate_email

from apps.accounts import policy, usernames
from apps.accounts.models import (
    User,
    UserEmailClaim,
)
from apps.accounts.models.identity import EmailClaimStatus
from apps.accounts.models.users import normalize_email, stable_user_id_for
from kody.errors import AccountDeleting, Conflict, InvalidInput, KodyError
from kody.userschema.models import UserSchema
from kody.userschema.naming import DIGEST_CHARS, schema_name_for

# --- errors -----------------------------------------------------------------------------------


class UsernameReserved(KodyError):
    code = "username_reserved"
    status = 422


class UsernameTaken(Conflict):
    code = "username_taken"


class EmailTaken(Conflict):
    code = "email_taken"


class FormerEmailClaimed(Conflict):
    code = "former_email_claimed"


class EmailUnavailable(Conflict):
    code = "email_unavailable"


class EmailNotVerified(Conflict):
    code = "email_not_verified"


class AccountSuspended(KodyError):
    code = "account_suspended"
    status = 403
    message = "This account is suspended. Contact support."


class InvalidCredentials(KodyError):
    code = "invalid_credentials"
    status = 401


def _field_error(field: str, message: str, cls: type[KodyError] = InvalidInput) -> KodyError:
    return cls(message, details={"field": field})


# --- deletion fence -----------------------------------------------------------------------------


# The one "account is being deleted" check lives in apps.accounts.policy; kept here by name
# because the identity services and their tests call it as identity.assert_can_mutate.
assert_can_mutate = policy.assert_can_mutate


P = ParamSpec("P")
R = TypeVar("R")


def refuses_deleting(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator for service functions whose first argument is the acting user."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        user = args[0] if args else kwargs.get("user")
        if not isinstance(user, User):
            raise TypeError(f"{fn.__name__} needs the acting user as its first argument")
        assert_can_mutate(user)
        return fn(*args, **kwargs)

    return wrapper


def _lock_user(user_id: int) -> User:
    user = User.objects.select_for_update().get(pk=user_id)
    if policy.is_deleting(user):
        raise AccountDeleting()
    return user


# --- validation ---------------------------------------------------------------------------------


def clean_email(email: str, field: str = "email") -> str:
    email = normalize_email(email or "")
    try:
        validate_email(email)
    except ValidationError:
        raise _field_error(field, "Enter a valid email address.") from None
    if len(email) > 320:
        raise _field_error(field, "That email address is too long.")
    return email


def clean_username(username: str, *, official: bool = False) -> str:
    """``official``: an operator-provisioned platform account may take a reserved name (the
    official scopes are reserved against signups), never a system mail local."""
    username = (username or "").strip().lower()
    problem = usernames.format_error(username)
    if problem:
        raise _field_error("username", problem)
    if official and username in usernames.SYSTEM_EMAIL_LOCALS:
        raise _field_error("username", "That name is a system mail address.", UsernameReserved)
    if not official and usernames.is_reserved(username):
        raise _field_error("username", "That username is reserved.", UsernameReserved)
    return username


def clean_password(password: str, user: User, field: str = "password") -> None:
    try:
        validate_password(password, user=user)
    except ValidationError as exc:
        raise _field_error(field, " ".join(exc.messages)) from None


def _claimed_by_other(email: str, user_id: int | None) -> bool:
    claims = UserEmailClaim.objects.filter(email=email, status=EmailClaimStatus.CLAIMED)
    if user_id is not None:
        claims = claims.exclude(user_id=user_id)
    return claims.exists()


def _mint_stable_user_id(email: str) -> str:
    candidate = stable_user_id_for(email)
    # The implicit id belongs to an account that has since moved to another address: never
    # remint it; give the new account a fresh id of the same shape. Nor an id whose per-user
    # schema name (its first characters, kody.userschema.naming) an account or a schema here
    # already has: two people can never share a schema, whatever the odds.
    while _id_taken(candidate):
        candidate = hashlib.sha256(f"{email}\n{secrets.token_hex(16)}".encode()).hexdigest()
    return candidate


def _id_taken(candidate: str) -> bool:
    prefix = candidate[:DIGEST_CHARS]
    # Every 64-hex id with this prefix sorts between these two: a range the unique index serves.
    low, high = prefix.ljust(64, "0"), prefix.ljust(64, "f")
    return (
        User.objects.filter(stable_user_id__gte=low, stable_user_id__lte=high).exists()
        or UserSchema.objects.filter(schema_name=schema_name_for(candidate)).exists()
    )


def _claim(user: User, email: str) -> None:
    UserEmailClaim.objects.update_or_create(
        user=user,
        email=email,
        defaults={"status": EmailClaimStatus.CLAIMED, "released_at": None},
        create_defaults={"status": EmailClaimStatus.CLAIMED},
    )
