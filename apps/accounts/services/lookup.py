"""Operator look-ups of one account by its stable user id."""

from __future__ import annotations

from apps.accounts.models import User
from kody.errors import NotFound


def account_by_stable_id(user_id: str) -> User:
    """The account with this stable id, or ``NotFound`` (the operator capabilities' 404)."""
    found = User.objects.filter(stable_user_id=user_id).first()
    if found is None:
        raise NotFound("No account has that user id.", details={"userId": user_id})
    return found
