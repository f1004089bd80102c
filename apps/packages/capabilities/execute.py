"""``execute``: run an agent's code in the sandbox, as the agent."""

from __future__ import annotations

from typing import Any

from apps.packages.services import execute as execute_service
from kody.capabilities import Context, capability


@capability(
    name="execute",
    domain="execute",
    # Not a mutation itself: every capability the code calls takes its own write guard, so a
    # guard here would only hold a lease (two meter round trips) around the whole run.
    title="Run code",
    description=(
        "Run JavaScript or TypeScript in a sandbox: `code` is an async function expression "
        "`async (params) => …` or an ES module whose default export is one. Inside, "
        "`kody.<capabilityName>(args)` calls a capability as you, and `fetch` goes through "
        "Kody (public hosts only; `{{secret:name}}` is filled for the secret's allowed hosts). "
        "Answers the JSON result, the console logs and the duration. Errors: execute_timeout, "
        "execute_memory, execute_error (with the JS message and stack), fetch_refused."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "code": {"type": "string", "minLength": 1, "maxLength": execute_service.MAX_CODE_CHARS},
            "params": {"description": "Passed to the function as its first argument."},
        },
        "required": ["code"],
        "additionalProperties": False,
    },
)
def execute(ctx: Context, code: str, params: Any = None) -> dict[str, Any]:
    return execute_service.execute(ctx, code, params)
