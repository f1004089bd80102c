"""A package skeleton whose functions call a binding's operations through the runtime's fetch.

The files are what ``packageSave`` takes (``package.json``, ``README.md``, ``mod.ts``). Nothing
from the spec is pasted into the code as code: every string from it goes in as a JSON string
literal, parameter names are used only as quoted property names, and comments have ``*/``
removed. The credential stays a ``{{secret:name}}`` placeholder that the host fills when the
secret's allowed hosts include the API's host.
"""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import urlsplit

from apps.packages.services.manifest import NAME_RE
from apps.packages.services.openapi import bindings
from kody.errors import InvalidInput

RESERVED = frozenset(
    "break case catch class const continue debugger default delete do else enum export extends "
    "false finally for function if import in instanceof new null return super switch this throw "
    "true try typeof var void while with yield let static implements interface package private "
    "protected public await async call".split()
)
PARAM_TYPES = {"integer": "number", "number": "number", "boolean": "boolean", "string": "string"}


def _identifier(slug: str, taken: set[str]) -> str:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", slug) if w]
    if not words:
        words = ["operation"]
    name = words[0][:1].lower() + words[0][1:] + "".join(w[:1].upper() + w[1:] for w in words[1:])
    if name[0].isdigit():
        name = "op" + name
    if name in RESERVED:
        name += "Op"
    candidate, n = name[:80], 2
    while candidate in taken:
        candidate, n = f"{name[:76]}{n}", n + 1
    taken.add(candidate)
    return candidate


def _comment(text: str) -> str:
    return " ".join(text.replace("*/", "* /").split())[:300]


def _literal(value: str) -> str:
    return json.dumps(value)


def _path_expression(path: str, params: list[dict[str, Any]]) -> str:
    names = {p["name"] for p in params if p["in"] == "path"}
    parts: list[str] = []
    for piece in re.split(r"(\{[^{}]+\})", path):
        if not piece:
            continue
        inner = piece[1:-1]
        if piece.startswith("{") and inner in names:
            parts.append(f"encodeURIComponent(String(args[{_literal(inner)}]))")
        else:
            parts.append(_literal(piece))
    return " + ".join(parts) or '""'


def _function(op: dict[str, Any], name: str) -> str:
    params: list[dict[str, Any]] = []
    for p in op["parameters"]:
        # One property per name: a name used in two places keeps the first the spec lists.
        if p["in"] in ("path", "query", "header") and p["name"] not in {q["name"] for q in params}:
            params.append(p)
    body_key = "requestBody" if any(p["name"] == "body" for p in params) else "body"
    fields = []
    for p in params:
        kind = PARAM_TYPES.get(p["type"], "string | number | boolean")
        optional = "" if p["required"] else "?"
        fields.append(f"{_literal(p['name'])}{optional}: {kind}")
    body = op.get("requestBody")
    if body:
        fields.append(f"{body_key}{'' if body.get('required') else '?'}: unknown")
    required = any(p["required"] for p in params) or bool(body and body.get("required"))
    signature = f"args: {{ {'; '.join(fields)} }}" + ("" if required else " = {}")
    query = ", ".join(
        f"{_literal(p['name'])}: args[{_literal(p['name'])}]" for p in params if p["in"] == "query"
    )
    headers = ", ".join(
        f"{_literal(p['name'])}: args[{_literal(p['name'])}]" for p in params if p["in"] == "header"
    )
    options = [f"query: {{ {query} }}", f"headers: {{ {headers} }}"]
    if body:
        options.append(f"body: args.{body_key}")
    doc = f"{op['method']} {op['path']}" + (f" — {op['summary']}" if op["summary"] else "")
    return (
        f"/** {_comment(doc)} */\n"
        f"export async function {name}({signature}): Promise<unknown> {{\n"
        f"  return await call({_literal(op['method'])}, {_path_expression(op['path'], params)}, "
        f"{{ {', '.join(options)} }});\n"
        "}\n"
    )


def _auth_lines(auth: dict[str, Any]) -> tuple[str, str]:
    """The line that adds the credential header, and the line that builds the request URL."""
    kind = auth.get("type", "none")
    secret = "{{secret:" + str(auth.get("secretName", "")) + "}}"
    plain = "  const target = url.toString();\n"
    if kind == "bearer":
        return f'  headers["authorization"] = {_literal("Bearer " + secret)};\n', plain
    if kind == "header":
        return f"  headers[{_literal(str(auth['name']).lower())}] = {_literal(secret)};\n", plain
    if kind == "query":
        # Appended as text: URL encoding would break the placeholder the host fills in.
        pair = f"{auth['name']}={secret}"
        return "", (
            f'  const target = url.toString() + (url.search ? "&" : "?") + {_literal(pair)};\n'
        )
    return "", plain


RUNTIME = """type Scalar = string | number | boolean | undefined;

interface CallOptions {
  query?: Record<string, Scalar>;
  headers?: Record<string, Scalar>;
  body?: unknown;
}

async function call(method: string, path: string, options: CallOptions): Promise<unknown> {
  const url = new URL(BASE_URL + path);
  for (const [key, value] of Object.entries(options.query ?? {})) {
    if (value !== undefined) url.searchParams.set(key, String(value));
  }
  const headers: Record<string, string> = { accept: "application/json" };
  for (const [key, value] of Object.entries(options.headers ?? {})) {
    if (value !== undefined) headers[key.toLowerCase()] = String(value);
  }
__AUTH_HEADER____AUTH_QUERY__  let payload: string | undefined;
  if (options.body !== undefined) {
    headers["content-type"] = "application/json";
    payload = JSON.stringify(options.body);
  }
  const response = await fetch(target, { method, headers, body: payload });
  const text = await response.text();
  if (!response.ok) {
    throw new Error(`${method} ${path} answered ${response.status}: ${text.slice(0, 500)}`);
  }
  const type = response.headers.get("content-type") ?? "";
  return type.includes("json") && text ? JSON.parse(text) : text;
}
"""


def package_name(username: str, wanted: str | None, binding_name: str) -> str:
    short = wanted or re.sub(r"[^a-z0-9._-]+", "-", binding_name.lower()).strip("-._")
    short = (short or "api")[:90]
    if not wanted:
        short = f"{short}-client"
    name = f"@{username}/{short}"
    if not NAME_RE.match(name):
        raise InvalidInput(
            "packageName must be lower case letters, digits, '.', '_' or '-'.",
            details={"field": "packageName"},
        )
    return name


def scaffold(
    user_id: str, username: str, binding_name: str, package: str | None = None
) -> dict[str, Any]:
    binding, operations = bindings.operations_of(user_id, binding_name)
    name = package_name(username, package, binding.name)
    taken: set[str] = set()
    functions = [(op, _identifier(op["slug"], taken)) for op in operations]
    auth = dict(binding.auth_json) or {"type": "none"}
    auth_header, auth_query = _auth_lines(auth)
    title = binding.spec_title or binding.name
    module = (
        f"// A client for {_comment(title)} {_comment(binding.spec_version)}, from the Kody "
        f"OpenAPI binding {_comment(binding.name)}.\n"
        f"// Spec: {_comment(binding.spec_url)}\n\n"
        f"export const BASE_URL = {_literal(binding.api_base_url)};\n\n"
        + RUNTIME.replace("__AUTH_HEADER__", auth_header).replace("__AUTH_QUERY__", auth_query)
        + "\n"
        + "\n".join(_function(op, fn) for op, fn in functions)
    )
    host = urlsplit(binding.api_base_url).hostname or ""
    readme = _readme(name, binding, auth, host, functions)
    manifest = {
        "name": name,
        "exports": {".": "./mod.ts"},
        "kody": {
            "description": f"Calls {title} through its OpenAPI operations."[:2000],
            "category": "integrations",
            "tags": ["integrations", "openapi"],
        },
    }
    return {
        "packageName": name,
        "bindingName": binding.name,
        "files": {
            "package.json": json.dumps(manifest, indent=2) + "\n",
            "README.md": readme,
            "mod.ts": module,
        },
        "functions": [{"name": fn, "operation": op["slug"]} for op, fn in functions],
    }


def _readme(
    name: str,
    binding: Any,
    auth: dict[str, Any],
    host: str,
    functions: list[tuple[dict[str, Any], str]],
) -> str:
    lines = [
        f"# {name}",
        "",
        f"Calls {_comment(binding.spec_title or binding.name)} at `{binding.api_base_url}`, "
        f"generated from the OpenAPI binding `{binding.name}`.",
        "",
    ]
    if auth.get("type", "none") != "none":
        lines += [
            f"Requests carry the secret `{auth['secretName']}` ({auth['type']}). Save it with "
            f"`secretSet` and allow the host `{host}` on it; the host fills it in, the code "
            "never sees it.",
            "",
        ]
    lines += ["## Functions", ""]
    for op, fn in functions:
        summary = f" — {_comment(op['summary'])}" if op["summary"] else ""
        lines.append(f"* `{fn}`: `{op['method']} {_comment(op['path'])}`{summary}")
    return "\n".join(lines) + "\n"
