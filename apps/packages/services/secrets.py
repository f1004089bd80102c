"""Secrets: values sealed with AES-GCM in buckets scoped to the user, a package or a session.

A secret value leaves this module only through ``resolve_for_use``, which the runtime calls
when a package actually uses it; no capability, page, export, log line or error message ever
carries it. Metadata (name, description, grants, expiry) is listed freely.

Grants (seed 000): ``allowed_hosts`` is a separate gate for every use and is never implied.
A user-scoped secret may be used by the user's self-authored packages and adopted forks; an
unadopted community fork needs the package in ``allowed_packages``, which only the owner adds,
in the browser. Package-scoped secrets belong to their package alone. An expired entry (or
bucket) is missing for use but still listed, so it can be rotated.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from urllib.parse import urlencode

from django.db import transaction
from django.utils import timezone

from apps.accounts import policy
from apps.packages.models import SavedPackage, SecretBucket, SecretEntry
from apps.packages.models.secrets import SecretScope
from apps.packages.services import crypto
from kody.errors import Forbidden, InvalidInput, NotFound

log = logging.getLogger(__name__)
ROTATE_BATCH = 500

# Forks live in community, an app built on this one; it registers how to tell that a package
# is someone's fork they have not adopted yet (``register_unadopted_fork_check``).
_unadopted_fork_checks: list[Callable[[str, str], bool]] = []


def register_unadopted_fork_check(check: Callable[[str, str], bool]) -> None:
    """``check(user_id, package_id)``: True when the package is the user's unadopted fork."""
    _unadopted_fork_checks[:] = [check]


# A managed user secret may be reserved to the packages in its ``allowed_packages`` (an
# integration whose usage mode is "allowed-packages"): then neither the user's own other
# packages nor ad hoc code may use it. Integrations register how to tell.
_exclusive_checks: list[Callable[[str, str], bool]] = []


def register_exclusive_grant_check(check: Callable[[str, str], bool]) -> None:
    """``check(user_id, secret_name)``: True when only granted packages may use the user
    secret ``secret_name``."""
    if check not in _exclusive_checks:
        _exclusive_checks.append(check)


class SecretNotFound(NotFound):
    code = "secret_not_found"
    message = "No secret with that name."


class SecretNotGranted(Forbidden):
    code = "secret_not_granted"
    message = "This secret is not granted for that use."


@dataclass(frozen=True)
class NewSecret:
    name: str
    value: str
    description: str = ""
    allowed_hosts: Sequence[str] | None = None
    expires_at: datetime | None = None


def _aad(user_id: str, bucket_id: str, name: str) -> str:
    return f"secret_entries:v1:{user_id}:{bucket_id}:{name}"


def bucket_key(user_id: str, scope: str, binding_key: str | None) -> str:
    if scope == SecretScope.USER:
        if binding_key:
            raise InvalidInput(
                "A user-scoped secret takes no bindingKey.", details={"field": "bindingKey"}
            )
        return ""
    if not binding_key:
        raise InvalidInput(
            f"A {scope}-scoped secret needs a bindingKey.", details={"field": "bindingKey"}
        )
    if scope == SecretScope.PACKAGE and not _owns_package(user_id, binding_key):
        raise NotFound("No saved package with that id.", details={"bindingKey": binding_key})
    return binding_key


def _owns_package(user_id: str, package_id: str) -> bool:
    return SavedPackage.objects.filter(user_id=user_id, id=package_id).exists()


def metadata(entry: SecretEntry, bucket: SecretBucket) -> dict[str, Any]:
    now = timezone.now()
    ends = [t for t in (entry.expires_at, bucket.expires_at) if t is not None]
    expires = min(ends) if ends else None
    return {
        "name": entry.name,
        "description": entry.description,
        "scope": bucket.scope,
        "bindingKey": bucket.binding_key or None,
        "allowedHosts": list(entry.allowed_hosts),
        "allowedPackages": list(entry.allowed_packages),
        "expiresAt": expires.isoformat() if expires else None,
        "expired": expires is not None and expires <= now,
        "createdAt": entry.created_at.isoformat(),
        "updatedAt": entry.updated_at.isoformat(),
    }


def set_many(
    user_id: str,
    secrets: Sequence[NewSecret],
    *,
    scope: str = SecretScope.USER,
    binding_key: str | None = None,
) -> list[dict[str, Any]]:
    """Seal and save every secret, or none (one transaction)."""
    key = bucket_key(user_id, scope, binding_key)
    names = [s.name for s in secrets]
    if len(set(names)) != len(names):
        raise InvalidInput("Each name may appear once.", details={"field": "secrets"})
    # The plan's secrets limit counts every entry of the user: the new names are counted and
    # saved under the owner's count lock, so parallel saves cannot pass it together.
    with transaction.atomic(), policy.count_limit(user_id, "secrets") as slot:
        bucket, _ = SecretBucket.objects.get_or_create(
            user_id=user_id, scope=scope, binding_key=key
        )
        existing = set(
            SecretEntry.objects.filter(bucket=bucket, name__in=names).values_list("name", flat=True)
        )
        slot.take(len(set(names) - existing))
        prepared = [_prepare(user_id, bucket, s) for s in secrets]
        grown = sum(g for _, g in prepared)
        # Sealed secrets are stored bytes too: reserve what the batch adds before saving any
        # of it, so over storage_bytes the coded limit error rolls back the whole batch.
        policy.reserve_storage_bytes(user_id, grown)
        try:
            for entry, _ in prepared:
                entry.save()
        except BaseException:
            policy.release_storage_bytes(user_id, grown)
            raise
        if grown < 0:
            transaction.on_commit(lambda: policy.release_storage_bytes(user_id, -grown))
        saved = [e for e, _ in prepared]
    log.info("secrets saved: user=%s scope=%s count=%d", user_id[:8], scope, len(saved))
    return [metadata(e, bucket) for e in saved]


def secret_bytes(entry: SecretEntry) -> int:
    """What a secret weighs against storage_bytes: its name, sealed value, description and
    allowed hosts, UTF-8 encoded (reconciliation measures whole rows and corrects the rest)."""
    hosts = ",".join(entry.allowed_hosts or [])
    return sum(
        len(t.encode()) for t in (entry.name, entry.encrypted_value, entry.description, hosts)
    )


def _save(user_id: str, bucket: SecretBucket, new: NewSecret) -> SecretEntry:
    entry, _ = _prepare(user_id, bucket, new)
    entry.save()
    return entry


def _prepare(user_id: str, bucket: SecretBucket, new: NewSecret) -> tuple[SecretEntry, int]:
    """The sealed entry, not yet saved, and how many bytes saving it adds (or frees)."""
    key_id, sealed = crypto.seal(new.value, _aad(user_id, bucket.id, new.name))
    entry = SecretEntry.objects.select_for_update().filter(bucket=bucket, name=new.name).first()
    before = secret_bytes(entry) if entry is not None else 0
    if entry is None:
        entry = SecretEntry(bucket=bucket, name=new.name)
    entry.encrypted_value = sealed
    entry.key_id = key_id
    entry.description = new.description or entry.description
    if new.allowed_hosts is not None:
        entry.allowed_hosts = sorted({h.strip().lower() for h in new.allowed_hosts if h.strip()})
    entry.expires_at = new.expires_at
    return entry, secret_bytes(entry) - before


def save_managed(
    user_id: str,
    new: NewSecret,
    *,
    allowed_packages: Sequence[str] | None = None,
) -> SecretEntry:
    """Seal one user secret that Kody itself maintains (an integration's tokens, an OAuth
    app's client secret). Unlike ``set_many`` it is not counted against the plan's secrets
    limit: the person did not add it, and an OAuth callback must not fail on a count. Call it
    inside the caller's transaction."""
    bucket, _ = SecretBucket.objects.get_or_create(
        user_id=user_id, scope=SecretScope.USER, binding_key=""
    )
    entry = _save(user_id, bucket, new)
    if allowed_packages is not None:
        entry.allowed_packages = sorted(set(allowed_packages))
        entry.save(update_fields=["allowed_packages", "updated_at"])
    return entry


def read_managed(user_id: str, name: str) -> str | None:
    """The plaintext of the user's own live secret ``name`` for Kody's own server-side use
    (never for a reply), or None when it is missing or expired."""
    entry = _live_entry(user_id, SecretScope.USER, "", name)
    if entry is None:
        return None
    return crypto.open_sealed(
        entry.key_id, entry.encrypted_value, _aad(user_id, entry.bucket_id, entry.name)
    )


def sealed_fingerprint(user_id: str, name: str) -> str:
    """Changes whenever the secret is re-sealed (a fresh nonce every time); '' when absent.
    Lets a caller tell whether someone replaced the value while it waited on a lock."""
    return (
        SecretEntry.objects.filter(
            bucket__user_id=user_id,
            bucket__scope=SecretScope.USER,
            bucket__binding_key="",
            name=name,
        )
        .values_list("encrypted_value", flat=True)
        .first()
        or ""
    )


def delete_managed(user_id: str, names: Sequence[str]) -> int:
    names = [n for n in names if n]
    if not names:
        return 0
    deleted, _ = SecretEntry.objects.filter(
        bucket__user_id=user_id,
        bucket__scope=SecretScope.USER,
        bucket__binding_key="",
        name__in=names,
    ).delete()
    return deleted


def list_secrets(
    user_id: str, *, scope: str | None = None, binding_key: str | None = None
) -> list[dict[str, Any]]:
    buckets = SecretBucket.objects.filter(user_id=user_id)
    if scope is not None:
        buckets = buckets.filter(scope=scope)
    if binding_key is not None:
        buckets = buckets.filter(binding_key=binding_key)
    by_id = {b.id: b for b in buckets}
    entries = SecretEntry.objects.filter(bucket_id__in=by_id).order_by("bucket_id", "name")
    return [metadata(e, by_id[e.bucket_id]) for e in entries]


def delete_secret(
    user_id: str, *, name: str, scope: str = SecretScope.USER, binding_key: str | None = None
) -> None:
    key = bucket_key(user_id, scope, binding_key)
    with transaction.atomic():
        doomed = SecretEntry.objects.select_for_update().filter(
            bucket__user_id=user_id, bucket__scope=scope, bucket__binding_key=key, name=name
        )
        freed = sum(secret_bytes(e) for e in doomed)
        deleted, _ = doomed.delete()
        if not deleted:
            raise SecretNotFound(details={"name": name})
        transaction.on_commit(lambda: policy.release_storage_bytes(user_id, freed))


def set_allowed_packages(user_id: str, name: str, package_ids: Sequence[str]) -> dict[str, Any]:
    """The owner's grant of a user secret to packages (the account page; never an agent)."""
    entry = _entry(user_id, SecretScope.USER, "", name)
    owned = set(
        SavedPackage.objects.filter(user_id=user_id, id__in=list(package_ids)).values_list(
            "id", flat=True
        )
    )
    entry.allowed_packages = sorted(owned)
    entry.save(update_fields=["allowed_packages", "updated_at"])
    return metadata(entry, entry.bucket)


@dataclass(frozen=True)
class GrantRequest:
    """A package asking for a user secret (``secretLock``); the owner decides on the page."""

    secret: dict[str, Any]
    package: SavedPackage

    @property
    def granted(self) -> bool:
        return self.package.id in self.secret["allowedPackages"]


def grant_request(user_id: str, name: str, package_id: str) -> GrantRequest:
    """Both must be the caller's: another user's secret or package is not found."""
    entry = _entry(user_id, SecretScope.USER, "", name)
    package = SavedPackage.objects.filter(user_id=user_id, id=package_id).first()
    if package is None:
        raise NotFound("No saved package with that id.", details={"packageId": package_id})
    return GrantRequest(metadata(entry, entry.bucket), package)


def approval_path(name: str, package_id: str) -> str:
    return f"/account/secrets/approve?{urlencode({'name': name, 'package': package_id})}"


def approve_package(user_id: str, name: str, package_id: str) -> dict[str, Any]:
    """The owner adds one package to a user secret's grant (the approve page's POST)."""
    with transaction.atomic():
        grant_request(user_id, name, package_id)
        entry = (
            SecretEntry.objects.select_for_update()
            .select_related("bucket")
            .get(
                bucket__user_id=user_id,
                bucket__scope=SecretScope.USER,
                bucket__binding_key="",
                name=name,
            )
        )
        if package_id not in entry.allowed_packages:
            entry.allowed_packages = sorted({*entry.allowed_packages, package_id})
            entry.save(update_fields=["allowed_packages", "updated_at"])
    log.info("secret grant approved: user=%s package=%s", user_id[:8], package_id)
    return metadata(entry, entry.bucket)


def _entry(user_id: str, scope: str, key: str, name: str) -> SecretEntry:
    entry = (
        SecretEntry.objects.select_related("bucket")
        .filter(bucket__user_id=user_id, bucket__scope=scope, bucket__binding_key=key, name=name)
        .first()
    )
    if entry is None:
        raise SecretNotFound(details={"name": name})
    return entry


def resolve_for_use(user_id: str, name: str, *, package_id: str | None, host: str) -> str:
    """The plaintext for a package's request to ``host``, if every gate allows it.

    The package's own secret wins over the user's secret of the same name. Without a package
    (the user's own ad hoc ``execute``) only the user's secrets and the host gate apply."""
    own = _live_entry(user_id, SecretScope.PACKAGE, package_id, name) if package_id else None
    entry = own or _live_entry(user_id, SecretScope.USER, "", name)
    if entry is None:
        raise SecretNotFound(details={"name": name})
    if host.lower() not in entry.allowed_hosts:
        raise SecretNotGranted("This secret is not allowed for that host.", details={"name": name})
    if own is None and _exclusive(user_id, entry):
        if not package_id or package_id not in entry.allowed_packages:
            raise SecretNotGranted(
                "This secret is reserved to the packages it names.",
                details={"name": name, "packageId": package_id},
            )
    elif own is None and package_id and not _package_may_use(user_id, package_id, entry):
        raise SecretNotGranted(details={"name": name, "packageId": package_id})
    return crypto.open_sealed(
        entry.key_id, entry.encrypted_value, _aad(user_id, entry.bucket_id, entry.name)
    )


def resolve_for_signing(user_id: str, name: str) -> str:
    """The plaintext of the user's own live secret, for a signature computed on the server
    (``secretJwtSign``): the value itself never leaves the caller of this function."""
    entry = _live_entry(user_id, SecretScope.USER, "", name)
    if entry is None:
        raise SecretNotFound(details={"name": name})
    return crypto.open_sealed(
        entry.key_id, entry.encrypted_value, _aad(user_id, entry.bucket_id, entry.name)
    )


def _live_entry(user_id: str, scope: str, key: str, name: str) -> SecretEntry | None:
    try:
        entry = _entry(user_id, scope, key, name)
    except SecretNotFound:
        return None
    now = timezone.now()
    for ends in (entry.expires_at, entry.bucket.expires_at):
        if ends is not None and ends <= now:
            return None
    return entry


def _exclusive(user_id: str, entry: SecretEntry) -> bool:
    return any(check(user_id, entry.name) for check in _exclusive_checks)


def _package_may_use(user_id: str, package_id: str, entry: SecretEntry) -> bool:
    if package_id in entry.allowed_packages:
        return True
    if not _owns_package(user_id, package_id):
        return False
    return not any(check(user_id, package_id) for check in _unadopted_fork_checks)


@dataclass
class Rotation:
    """What ``rotate`` did: rows re-sealed per key they left, rows no key here opens, and
    how many rows still are not under the current key."""

    current: str
    resealed: Counter[str] = field(default_factory=Counter)
    unreadable: Counter[str] = field(default_factory=Counter)
    remaining: int = 0


def rotate(*, batch: int = ROTATE_BATCH) -> Rotation:
    """Re-seal every entry not under the current key, in id order (a row that no key opens
    is counted and passed, never retried forever)."""
    report = Rotation(crypto.keyring().current)
    after = 0
    while True:
        with transaction.atomic():
            rows = list(
                SecretEntry.objects.select_for_update(skip_locked=True)
                .select_related("bucket")
                .exclude(key_id=report.current)
                .filter(id__gt=after)
                .order_by("id")[:batch]
            )
            for entry in rows:
                aad = _aad(entry.bucket.user_id, entry.bucket_id, entry.name)
                try:
                    plain = crypto.open_sealed(entry.key_id, entry.encrypted_value, aad)
                except crypto.Undecryptable:
                    report.unreadable[entry.key_id] += 1
                    continue
                old_key = entry.key_id
                entry.key_id, entry.encrypted_value = crypto.seal(plain, aad)
                entry.save(update_fields=["key_id", "encrypted_value", "updated_at"])
                report.resealed[old_key] += 1
        if rows:
            after = rows[-1].id
        if len(rows) < batch:
            break
    report.remaining = SecretEntry.objects.exclude(key_id=report.current).count()
    return report
