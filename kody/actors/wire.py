"""What travels between a caller and a shard worker: calls out, outcomes back, as JSON.

An outcome is serialized once and the same text is stored as the call record and sent as the
reply, so a redelivered call answers with exactly what the first delivery answered. A failed
call carries its exception's importable type name, ``args`` and instance state; the caller
rebuilds an exception of the same type (as pickle would, without running ``__init__``).
"""

from __future__ import annotations

import importlib
import json
import traceback
from dataclasses import dataclass, field
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder

from kody.actors.errors import ActorError

VERSION = 1


# One encoder for every message (what ``json.dumps(value, cls=..., separators=...)`` would
# build per call; ``encode`` keeps no state between calls).
_ENCODER = DjangoJSONEncoder(separators=(",", ":"))


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


@dataclass(frozen=True)
class Call:
    id: str
    user_id: str
    schema: str
    actor: str
    method: str
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    reply: bool = True

    def encode(self) -> str:
        return dumps(
            {
                "v": VERSION,
                "id": self.id,
                "u": self.user_id,
                "s": self.schema,
                "a": self.actor,
                "m": self.method,
                "p": self.args,
                "k": self.kwargs,
                "r": self.reply,
            }
        )

    @classmethod
    def decode(cls, raw: str | bytes) -> Call:
        data = json.loads(raw)
        if data.get("v") != VERSION:
            raise ValueError(f"unsupported actor message version {data.get('v')!r}")
        return cls(
            id=data["id"],
            user_id=data["u"],
            schema=data["s"],
            actor=data["a"],
            method=data["m"],
            args=list(data.get("p") or []),
            kwargs=dict(data.get("k") or {}),
            reply=bool(data.get("r")),
        )


@dataclass(frozen=True)
class Outcome:
    text: str
    ok: bool
    # Database errors are not recorded: a retry with the same key should run again.
    recordable: bool = True

    @classmethod
    def success(cls, value: Any) -> Outcome:
        return cls(text=dumps({"ok": True, "value": value}), ok=True)

    @classmethod
    def failure(cls, exc: BaseException, *, recordable: bool = True) -> Outcome:
        return cls(
            text=dumps({"ok": False, "error": describe(exc)}), ok=False, recordable=recordable
        )

    @classmethod
    def parse(cls, text: str | bytes) -> Outcome:
        text = text.decode() if isinstance(text, bytes) else text
        return cls(text=text, ok=bool(json.loads(text)["ok"]))

    def unwrap(self) -> Any:
        return unwrap(self.text)


def unwrap(text: str | bytes) -> Any:
    """The value of a serialized outcome, or its exception raised."""
    # Text, not bytes: ``json.loads`` would first guess the bytes' encoding (it is UTF-8).
    data = json.loads(text.decode() if isinstance(text, bytes) else text)
    if data["ok"]:
        return data["value"]
    raise rebuild(data["error"])


def _jsonable(value: Any) -> Any:
    try:
        return json.loads(dumps(value))
    except (TypeError, ValueError):
        return repr(value)


def describe(exc: BaseException) -> dict[str, Any]:
    kind = type(exc)
    state = {key: _jsonable(value) for key, value in vars(exc).items() if not key.startswith("_")}
    return {
        "type": f"{kind.__module__}:{kind.__qualname__}",
        "args": [_jsonable(arg) for arg in exc.args],
        "state": state,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc))[-4000:],
    }


def _import_type(name: str) -> type[BaseException] | None:
    module_name, _, qualname = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError, ValueError):
        return None
    if isinstance(found, type) and issubclass(found, Exception):
        return found
    return None


def rebuild(error: dict[str, Any]) -> BaseException:
    kind = _import_type(error["type"])
    if kind is None:
        exc: BaseException = ActorError(f"{error['type']}: {error['message']}")
    else:
        exc = kind.__new__(kind)
        exc.args = tuple(error.get("args") or ())
        exc.__dict__.update(error.get("state") or {})
    exc.add_note("raised inside an actor; remote traceback:\n" + error.get("traceback", ""))
    return exc
