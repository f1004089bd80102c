"""What a job runs: a small interface, with two kinds.

A target is stored in ``jobs.params_json["target"]``. One kind is a capability call the
owner may make, ``{"capability": "accountUsage", "args": {...}}``, run with the owner's
identity and the scopes of the token that scheduled it, exactly as if that token had called
it. The other is a package export, ``{"package": "@scope/name", "export": name, "args"}``,
run from its published bundle in the sandbox under the same grant (``PackageTarget``).

The caller context stored with the job names the token (``tokenId``) whose grant the job
replays; ``apps.jobs.grants`` checks before every run that the token is still live and the
owner may still act. A target that would carry a secret value (an argument marked
``x-kody-secret`` in its capability's schema, however deep) is refused when it is scheduled:
job parameters are stored, listed and exported, and a secret must never be among them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from kody.capabilities import Context, get, invoke
from kody.capabilities.secrecy import secret_paths
from kody.errors import Forbidden, InvalidInput

if TYPE_CHECKING:
    from apps.accounts.models import User

FULL_ACCESS = "*"


class InvalidTarget(InvalidInput):
    code = "invalid_target"
    message = "The job's target is not a capability the caller may call."


class SecretInTarget(InvalidTarget):
    code = "secret_in_job_target"
    message = (
        "A job cannot carry a secret value: job parameters are stored and shown. "
        "Save the secret with secretSet now and let the job use it by name."
    )


@dataclass(frozen=True)
class CallerScopes:
    """The scheduling token's grant, replayed at run time (quacks like an AccessToken)."""

    scopes: tuple[str, ...]
    principal: str
    # The access token whose grant this replays (None: scheduled from a session).
    token_id: int | None = None
    name: str = "scheduled job"
    kind: str = "job"
    token_prefix: str = ""

    @property
    def principal_id(self) -> str:
        return self.principal

    def allows(self, scope: str) -> bool:
        return FULL_ACCESS in self.scopes or scope in self.scopes


def caller_context(ctx: Context) -> dict[str, Any]:
    token = ctx.token
    scopes = list(token.scopes) if token is not None else [FULL_ACCESS]
    principal = token.principal_id if token is not None else f"{ctx.surface}:{ctx.user_id}"
    context: dict[str, Any] = {
        "userId": ctx.user_id,
        "surface": ctx.surface,
        "scopes": scopes,
        "principal": principal,
    }
    # An AccessToken row's pk, or the token a running job replays (a job scheduling a job).
    token_id = getattr(token, "token_id", None) if isinstance(token, CallerScopes) else None
    if token is not None and not isinstance(token, CallerScopes):
        token_id = getattr(token, "pk", None)
    if token_id is not None:
        context["tokenId"] = int(token_id)
    return context


def scopes_of(context: dict[str, Any]) -> CallerScopes:
    token_id = context.get("tokenId")
    return CallerScopes(
        tuple(context.get("scopes") or ()),
        str(context.get("principal", "")),
        int(token_id) if isinstance(token_id, int) else None,
    )


class JobTarget(Protocol):
    kind: str

    def as_json(self) -> dict[str, Any]: ...

    def run(self, owner: User, grant: CallerScopes) -> Any: ...


@dataclass(frozen=True)
class CapabilityTarget:
    capability: str
    args: dict[str, Any] = field(default_factory=dict)
    kind: str = "capability"

    def as_json(self) -> dict[str, Any]:
        return {"capability": self.capability, "args": self.args}

    def check(self, ctx: Context) -> None:
        """Refuse, at scheduling time, a call the caller could not make themselves."""
        cap = get(self.capability)
        if cap is None or cap.role != "user":
            raise InvalidTarget(details={"capability": self.capability})
        if ctx.token is not None and not ctx.token.allows(cap.scope):
            raise Forbidden(
                "The token that schedules a job must itself grant the job's capability.",
                details={"capability": self.capability, "scope": cap.scope},
            )
        secret = secret_paths(self.capability, self.args)
        if secret:
            # The pointers say where, never what: the value is not echoed.
            raise SecretInTarget(details={"capability": self.capability, "paths": secret[:10]})
        errors = [e.message for e in cap.validator.iter_errors(self.args)][:5]
        if errors:
            raise InvalidTarget(
                "The job's args do not match the capability's input.",
                details={"capability": self.capability, "errors": errors},
            )

    def run(self, owner: User, grant: CallerScopes) -> Any:
        cap = get(self.capability)
        if cap is None or cap.role != "user":  # removed, or never schedulable
            raise InvalidTarget(details={"capability": self.capability})
        ctx = Context(user=owner, token=grant, surface="job")  # type: ignore[arg-type]
        return invoke(self.capability, ctx, self.args)


@dataclass(frozen=True)
class PackageTarget:
    """A published package export, ``{"package": "@scope/name", "export": name, "args"}``,
    run from its bundle as the owner under the scheduling grant, which must allow ``execute``."""

    package: str
    export: str
    args: dict[str, Any] = field(default_factory=dict)
    kind: str = "package"
    # What the run stands for where the runner names a capability: its scope and ledger key.
    capability: str = "execute"

    def as_json(self) -> dict[str, Any]:
        return {"package": self.package, "export": self.export, "args": self.args}

    def check(self, ctx: Context) -> None:
        from apps.packages.services import exports, packages

        if ctx.token is not None and not ctx.token.allows("execute"):
            raise Forbidden(
                "The token that schedules a package job must grant execute.",
                details={"scope": "execute"},
            )
        package = packages.owned(ctx.user_id, name=self.package)
        exports.bundle_for(package, self.export)

    def run(self, owner: User, grant: CallerScopes) -> Any:
        from apps.packages.services import exports, packages

        if not grant.allows("execute"):
            raise Forbidden("The job's grant does not allow execute.", details={"scope": "execute"})
        ctx = Context(user=owner, token=grant, surface="job")  # type: ignore[arg-type]
        package = packages.owned(owner.stable_user_id, name=self.package)
        return exports.run_export(ctx, package, self.export, self.args, surface="job", record=False)


def parse_target(data: Any) -> CapabilityTarget | PackageTarget:
    if isinstance(data, dict) and "package" in data:
        if not isinstance(data["package"], str) or not isinstance(data.get("export"), str):
            raise InvalidTarget('A package target is {"package": "@scope/name", "export": name}.')
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise InvalidTarget("A target's args are an object.")
        return PackageTarget(data["package"], data["export"], args)
    if not isinstance(data, dict) or not isinstance(data.get("capability"), str):
        raise InvalidTarget('A target is {"capability": name, "args": {...}}.')
    args = data.get("args", {})
    if not isinstance(args, dict):
        raise InvalidTarget("A target's args are an object.")
    return CapabilityTarget(data["capability"], args)
