"""The ways a person can sign in, counted, so none of them is removed when it is the last.

A usable password, each passkey and each social connection is one way in. Removing one
(unlinking a connection, deleting a passkey) must leave at least one; callers hold the user row
lock (``identity_rules._lock_user``) while they count and delete, so two removals at once
cannot both see "one more left".
"""

from __future__ import annotations

from dataclasses import dataclass

from apps.accounts.models import OAuthConnection, Passkey, User
from kody.errors import Conflict


class LastSignInMethod(Conflict):
    code = "last_sign_in_method"
    message = (
        "This is the only way left to sign in to your account. Set a password (use "
        "“Forgot your password?” on the sign-in page) or add another sign-in method first."
    )


@dataclass(frozen=True)
class SignInMethods:
    password: bool
    passkeys: int
    connections: int

    @property
    def count(self) -> int:
        return int(self.password) + self.passkeys + self.connections


def sign_in_methods(user: User) -> SignInMethods:
    return SignInMethods(
        password=user.has_usable_password(),
        passkeys=Passkey.objects.filter(user_id=user.pk).count(),
        connections=OAuthConnection.objects.filter(user_id=user.pk).count(),
    )


def refuse_if_last(user: User) -> None:
    """Raise ``LastSignInMethod`` unless removing one method still leaves another."""
    if sign_in_methods(user).count <= 1:
        raise LastSignInMethod()
