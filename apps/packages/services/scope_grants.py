"""Package scope grants: a person may act inside a platform account's package scope.

A grant exists only from a platform account (the scope owner) to a person account, never to
itself; the pair is unique. Operators create, list and revoke them (``adminPackageScopeGrant*``).
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from apps.accounts.models import User
from apps.accounts.models.users import AccountType
from apps.accounts.services.lookup import account_by_stable_id
from apps.packages.models import PackageScopeGrant
from kody.errors import Conflict, Forbidden, InvalidInput, NotFound


class ScopeOwnerNotPlatform(InvalidInput):
    code = "scope_owner_not_platform"
    message = "Only a platform account owns a package scope that can be granted."


class GranteeNotPerson(InvalidInput):
    code = "grantee_not_person"
    message = "A scope is granted to a person account."


class PackageScopeNotGranted(Forbidden):
    code = "package_scope_not_granted"
    message = (
        "That package scope belongs to a platform account and you hold no grant for it; "
        "publish under your own username."
    )


class ScopeGrantNotFound(NotFound):
    code = "scope_grant_not_found"
    message = "No such scope grant."


class ScopeGrantExists(Conflict):
    code = "scope_grant_exists"
    message = "That person already holds this scope."


def grant_view(grant: PackageScopeGrant, names: dict[str, str]) -> dict[str, Any]:
    return {
        "id": grant.pk,
        "scopeOwnerUserId": grant.scope_owner_user_id,
        "scopeOwnerUsername": names.get(grant.scope_owner_user_id),
        "granteeUserId": grant.grantee_user_id,
        "granteeUsername": names.get(grant.grantee_user_id),
        "createdByUserId": grant.created_by_user_id,
        "createdAt": grant.created_at.isoformat(),
    }


def usernames(grants: list[PackageScopeGrant]) -> dict[str, str]:
    ids = {g.scope_owner_user_id for g in grants} | {g.grantee_user_id for g in grants}
    return dict(
        User.objects.filter(stable_user_id__in=ids).values_list("stable_user_id", "username")
    )


def create(scope_owner_id: str, grantee_id: str, by: str) -> PackageScopeGrant:
    owner, grantee = account_by_stable_id(scope_owner_id), account_by_stable_id(grantee_id)
    if owner.account_type != AccountType.PLATFORM:
        raise ScopeOwnerNotPlatform(details={"scopeOwnerUserId": scope_owner_id})
    if grantee.account_type != AccountType.PERSON:
        raise GranteeNotPerson(details={"granteeUserId": grantee_id})
    try:
        with transaction.atomic():
            return PackageScopeGrant.objects.create(
                scope_owner_user_id=owner.stable_user_id,
                grantee_user_id=grantee.stable_user_id,
                created_by_user_id=by,
            )
    except IntegrityError as exc:
        raise ScopeGrantExists(details={"granteeUserId": grantee_id}) from exc


def revoke(scope_owner_id: str, grantee_id: str) -> None:
    deleted, _ = PackageScopeGrant.objects.filter(
        scope_owner_user_id=scope_owner_id, grantee_user_id=grantee_id
    ).delete()
    if not deleted:
        raise ScopeGrantNotFound(details={"scopeOwnerUserId": scope_owner_id})


def platform_scope_owner(scope: str) -> str | None:
    """The stable id of the platform account whose username is ``scope``, if there is one."""
    return (
        User.objects.filter(username__iexact=scope, account_type=AccountType.PLATFORM)
        .values_list("stable_user_id", flat=True)
        .first()
    )


def check_publish(user_id: str, username: str, scope: str) -> None:
    """May this person publish under ``@scope/…``? Their own username always; a platform
    account's scope only while an operator's grant to them stands. Anything else raises the
    coded refusal, so a revoked grant stops the next publish on every path."""
    if scope.lower() == username.lower():
        return
    owner = platform_scope_owner(scope)
    if (
        owner is None
        or not PackageScopeGrant.objects.filter(
            scope_owner_user_id=owner, grantee_user_id=user_id
        ).exists()
    ):
        raise PackageScopeNotGranted(details={"scope": scope})
