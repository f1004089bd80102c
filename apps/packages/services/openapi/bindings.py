"""A person's OpenAPI bindings: a spec URL, where its API lives, how to authenticate (by secret
*name*), and the operations picked from it.

Save and refresh fetch and validate the spec first, outside any transaction; only then, in one
transaction, is the binding written and its operations reconciled (added, changed, removed),
so a refused or broken spec writes nothing. Operations that may change something at the other
end (anything but GET, HEAD, OPTIONS, TRACE) are bound only when ``include_destructive`` is set.
Every read and write is scoped by the owner's stable user id.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction

from apps.packages.models import SecretEntry, UserOpenapiBinding, UserOpenapiBindingOperation
from apps.packages.services.openapi import spec as specs
from kody.errors import Conflict, InvalidInput, NotFound

MAX_BINDINGS = 50
AUTH_TYPES = ("none", "bearer", "header", "query")


class BindingNotFound(NotFound):
    code = "openapi_binding_not_found"
    message = "No OpenAPI binding with that name."


class TooManyBindings(Conflict):
    code = "openapi_binding_limit"
    message = "You have as many OpenAPI bindings as Kody keeps; delete one first."


class OperationNotInSpec(InvalidInput):
    code = "openapi_operation_not_in_spec"
    message = "An operation you selected is not in the spec."


class DestructiveNotIncluded(InvalidInput):
    code = "openapi_destructive_not_included"
    message = (
        "You selected operations that may change data (POST, PUT, PATCH, DELETE); "
        "pass includeDestructive to bind them."
    )


class NothingSelected(InvalidInput):
    code = "openapi_nothing_selected"
    message = "The selection matches no operation of the spec."


class BaseUrlMissing(InvalidInput):
    code = "openapi_base_url_missing"
    message = "The spec names no usable server URL; pass apiBaseUrl (http or https)."


def normalize_auth(auth: dict[str, Any] | None) -> dict[str, Any]:
    """The auth *shape*: a scheme and the name of the secret that holds the credential."""
    if not auth or auth.get("type", "none") == "none":
        return {"type": "none"}
    kind = auth.get("type")
    if kind not in AUTH_TYPES:
        raise InvalidInput(f"auth.type must be one of {', '.join(AUTH_TYPES)}.")
    out: dict[str, Any] = {"type": kind, "secretName": auth.get("secretName", "")}
    if not out["secretName"]:
        raise InvalidInput("auth.secretName names the secret holding the credential.")
    if kind in ("header", "query"):
        if not auth.get("name"):
            raise InvalidInput(f"auth.name is the {kind} that carries the credential.")
        out["name"] = auth["name"]
    return out


def select(
    operations: list[dict[str, Any]],
    selection: dict[str, Any],
    include_destructive: bool,
    *,
    strict: bool,
) -> tuple[list[dict[str, Any]], list[str]]:
    """The chosen operations and the slugs of destructive ones left out.

    ``strict`` (save) refuses names missing from the spec and destructive ones asked for by
    name without ``include_destructive``; a refresh just drops what no longer fits.
    """
    wanted = selection.get("operations") or []
    tags = set(selection.get("tags") or [])
    by_name: dict[str, dict[str, Any]] = {}
    for op in operations:
        by_name.setdefault(op["slug"], op)
        if op["operationId"]:
            by_name.setdefault(op["operationId"], op)
    if wanted:
        missing = [name for name in wanted if name not in by_name]
        if missing and strict:
            raise OperationNotInSpec(details={"operations": missing[:20]})
        picked = {by_name[n]["slug"]: by_name[n] for n in wanted if n in by_name}
        candidates = list(picked.values())
    elif tags:
        candidates = [op for op in operations if tags.intersection(op["tags"])]
    else:
        candidates = list(operations)
    destructive = [op["slug"] for op in candidates if op["destructive"]]
    if destructive and not include_destructive and wanted and strict:
        raise DestructiveNotIncluded(details={"operations": destructive[:20]})
    chosen = [op for op in candidates if include_destructive or not op["destructive"]]
    skipped = [] if include_destructive else destructive
    return chosen, skipped


def _get(user_id: str, name: str, *, lock: bool = False) -> UserOpenapiBinding:
    rows = UserOpenapiBinding.objects.filter(user_id=user_id, name=name)
    binding = (rows.select_for_update() if lock else rows).first()
    if binding is None:
        raise BindingNotFound(details={"name": name})
    return binding


def _operations(user_id: str, name: str) -> list[dict[str, Any]]:
    rows = UserOpenapiBindingOperation.objects.filter(user_id=user_id, binding_name=name)
    return [dict(row.operation_json) for row in rows.order_by("slug")]


def to_json(binding: UserOpenapiBinding, operation_count: int | None = None) -> dict[str, Any]:
    if operation_count is None:
        operation_count = UserOpenapiBindingOperation.objects.filter(
            user_id=binding.user_id, binding_name=binding.name
        ).count()
    return {
        "name": binding.name,
        "specUrl": binding.spec_url,
        "apiBaseUrl": binding.api_base_url,
        "apiBaseUrlExplicit": binding.api_base_url_explicit,
        "description": binding.description,
        "auth": dict(binding.auth_json) or {"type": "none"},
        "selection": dict(binding.selection_json),
        "includeDestructive": binding.include_destructive,
        "specTitle": binding.spec_title,
        "specVersion": binding.spec_version,
        "operationCount": operation_count,
        "createdAt": binding.created_at.isoformat(),
        "updatedAt": binding.updated_at.isoformat(),
    }


def _reconcile(user_id: str, name: str, chosen: list[dict[str, Any]]) -> dict[str, int]:
    existing = {
        row.slug: row
        for row in UserOpenapiBindingOperation.objects.select_for_update().filter(
            user_id=user_id, binding_name=name
        )
    }
    wanted = {op["slug"]: op for op in chosen}
    gone = [slug for slug in existing if slug not in wanted]
    UserOpenapiBindingOperation.objects.filter(
        user_id=user_id, binding_name=name, slug__in=gone
    ).delete()
    counts = {"added": 0, "updated": 0, "removed": len(gone), "unchanged": 0}
    fresh = []
    for slug, op in wanted.items():
        row = existing.get(slug)
        if row is None:
            fresh.append(
                UserOpenapiBindingOperation(
                    user_id=user_id, binding_name=name, slug=slug, operation_json=op
                )
            )
            counts["added"] += 1
        elif row.operation_json != op:
            row.operation_json = op
            row.save(update_fields=["operation_json", "updated_at"])
            counts["updated"] += 1
        else:
            counts["unchanged"] += 1
    UserOpenapiBindingOperation.objects.bulk_create(fresh)
    return counts


def save(
    user_id: str,
    *,
    name: str,
    spec_url: str,
    api_base_url: str | None = None,
    description: str = "",
    auth: dict[str, Any] | None = None,
    operations: list[str] | None = None,
    tags: list[str] | None = None,
    include_destructive: bool = False,
) -> dict[str, Any]:
    auth_shape = normalize_auth(auth)
    if api_base_url and not specs.is_api_base_url(api_base_url):
        raise BaseUrlMissing("apiBaseUrl must be an http(s) URL without query or credentials.")
    spec = specs.load(spec_url)
    selection: dict[str, Any] = {}
    if operations:
        selection["operations"] = list(dict.fromkeys(operations))
    elif tags:
        selection["tags"] = sorted(set(tags))
    chosen, skipped = select(spec.operations, selection, include_destructive, strict=True)
    if not chosen:
        raise NothingSelected(details={"skippedDestructive": skipped[:20]})
    base = (api_base_url or spec.base_url).rstrip("/")
    if not base:
        raise BaseUrlMissing()
    fields = {
        "spec_url": spec_url,
        "api_base_url": base,
        "api_base_url_explicit": bool(api_base_url),
        "description": description,
        "auth_json": auth_shape,
        "selection_json": selection,
        "include_destructive": include_destructive,
        "spec_title": spec.title,
        "spec_version": spec.version,
    }
    try:
        with transaction.atomic():
            binding = (
                UserOpenapiBinding.objects.select_for_update()
                .filter(user_id=user_id, name=name)
                .first()
            )
            if binding is None:
                if UserOpenapiBinding.objects.filter(user_id=user_id).count() >= MAX_BINDINGS:
                    raise TooManyBindings(details={"max": MAX_BINDINGS})
                binding = UserOpenapiBinding.objects.create(user_id=user_id, name=name, **fields)
                created = True
            else:
                for key, value in fields.items():
                    setattr(binding, key, value)
                binding.save()
                created = False
            changes = _reconcile(user_id, name, chosen)
    except IntegrityError:
        # Two first saves of one name raced; the other one won.
        raise Conflict(
            "This binding was saved by another call at the same time; try again.",
            code="openapi_binding_busy",
        ) from None
    return {
        "binding": to_json(binding, len(chosen)),
        "created": created,
        "operations": [op["slug"] for op in chosen],
        "skippedDestructive": skipped,
        "changes": changes,
        "warnings": auth_warnings(user_id, auth_shape),
    }


def auth_warnings(user_id: str, auth_shape: dict[str, Any]) -> list[dict[str, Any]]:
    """A binding may be saved before its secret (the secret is added in the browser), but
    the caller should know the operations cannot authenticate until it exists: neither a user
    secret nor any of the person's package secrets has that name."""
    name = auth_shape.get("secretName")
    if not name:
        return []
    exists = SecretEntry.objects.filter(bucket__user_id=user_id, name=name).exists()
    if exists:
        return []
    return [
        {
            "code": "openapi_secret_missing",
            "message": (
                f"No secret named {name!r} exists yet; add it (with this API's host in its "
                "allowed hosts) before the bound operations are called."
            ),
            "secretName": name,
        }
    ]


def get(user_id: str, name: str) -> dict[str, Any]:
    binding = _get(user_id, name)
    operations = _operations(user_id, name)
    return {"binding": to_json(binding, len(operations)), "operations": operations}


def operations_of(user_id: str, name: str) -> tuple[UserOpenapiBinding, list[dict[str, Any]]]:
    return _get(user_id, name), _operations(user_id, name)


def listing(user_id: str) -> list[dict[str, Any]]:
    bindings = list(UserOpenapiBinding.objects.filter(user_id=user_id).order_by("name"))
    counts: dict[str, int] = {}
    for binding_name in UserOpenapiBindingOperation.objects.filter(user_id=user_id).values_list(
        "binding_name", flat=True
    ):
        counts[binding_name] = counts.get(binding_name, 0) + 1
    return [to_json(b, counts.get(b.name, 0)) for b in bindings]


def delete(user_id: str, name: str) -> dict[str, Any]:
    with transaction.atomic():
        binding = _get(user_id, name, lock=True)
        # The database cascades too; deleting explicitly keeps the ORM's view honest.
        UserOpenapiBindingOperation.objects.filter(user_id=user_id, binding_name=name).delete()
        binding.delete()
    return {"deleted": True, "name": name}


def refresh(user_id: str, name: str) -> dict[str, Any]:
    """Refetch the spec and reconcile the bound operations with it in one transaction."""
    spec_url = _get(user_id, name).spec_url
    spec = specs.load(spec_url)
    with transaction.atomic():
        binding = _get(user_id, name, lock=True)
        if binding.spec_url != spec_url:
            raise Conflict("The binding changed while its spec was fetched; try again.")
        chosen, skipped = select(
            spec.operations, dict(binding.selection_json), binding.include_destructive, strict=False
        )
        binding.spec_title, binding.spec_version = spec.title, spec.version
        # The spec's server URL, unless the person chose the base URL themselves.
        new_base = (spec.base_url or "").rstrip("/")
        base_changed = bool(
            not binding.api_base_url_explicit and new_base and new_base != binding.api_base_url
        )
        if base_changed:
            binding.api_base_url = new_base
        binding.save()
        changes = _reconcile(user_id, name, chosen)
    return {
        "binding": to_json(binding, len(chosen)),
        "operations": [op["slug"] for op in chosen],
        "skippedDestructive": skipped,
        "changes": changes,
        "apiBaseUrlChanged": base_changed,
        "warnings": auth_warnings(user_id, dict(binding.auth_json)),
    }
