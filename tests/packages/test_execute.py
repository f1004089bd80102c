"""``execute``: an agent's code runs in a sandboxed Deno process and reaches Kody only through
the host — the escapes it might try each end in a coded error, and the pool stays healthy."""

from __future__ import annotations

import pytest

from kody.capabilities import capability, unregister
from kody.sandbox.pool import pool

pytestmark = pytest.mark.django_db(databases=["default", "audit"])


@pytest.fixture(autouse=True)
def _short_wall(settings):
    settings.KODY_EXECUTE_WALL_SECONDS = 3.0


def run(agent, code, **params):
    return agent.call("execute", code=code, params=params)


def refused(agent, code, status=422):
    return agent.error("execute", status, code=code)


def still_healthy(agent):
    """After any refusal the next call runs normally on a fresh process."""
    assert run(agent, "async (p) => p.n * 2", n=21)["result"] == 42
    assert pool().healthy() >= 1


def test_a_function_expression_gets_its_params_and_answers_result_logs_and_duration(as_owner):
    reply = run(as_owner, "async (p) => { console.log('adding', p); return p.a + p.b }", a=2, b=3)
    assert reply["result"] == 5
    assert reply["logs"] == [{"level": "log", "message": 'adding {"a":2,"b":3}'}]
    assert isinstance(reply["durationMs"], int) and reply["durationMs"] >= 0


def test_an_es_module_with_a_default_export_in_typescript_runs(as_owner):
    code = (
        "type P = {name: string};\nexport default async (p: P): Promise<string> => `hi ${p.name}`;"
    )
    assert run(as_owner, code, name="Ada")["result"] == "hi Ada"


def test_a_thrown_error_is_execute_error_with_message_and_a_trimmed_stack(as_owner):
    error = refused(as_owner, "async () => { throw new RangeError('too far') }")
    assert error["code"] == "execute_error"
    assert error["details"]["name"] == "RangeError" and error["details"]["message"] == "too far"
    assert "<code>" in error["details"]["stack"] and "harness" not in error["details"]["stack"]
    assert "data:application" not in error["details"]["stack"]


@pytest.mark.parametrize(
    ("code", "needs"),
    [
        ("async () => Deno.readTextFileSync('/etc/passwd')", "read access"),
        ("async () => Deno.env.get('DATABASE_URL')", "env access"),
        ("async () => new Deno.Command('id').outputSync()", "run access"),
        ("async () => Deno.dlopen('libc.so.6', {})", "ffi access"),
        ("async () => Deno.hostname()", "sys access"),
        ("async () => Deno.connect({hostname: '127.0.0.1', port: 5432})", "net access"),
    ],
)
def test_no_file_env_process_ffi_sys_or_network_permission(as_owner, code, needs):
    error = refused(as_owner, code)
    assert error["code"] == "execute_error"
    assert error["details"]["name"] == "NotCapable" and needs in error["details"]["message"]
    still_healthy(as_owner)


def test_importing_from_a_url_is_refused(as_owner):
    error = refused(as_owner, "async () => (await import('https://deno.land/std/version.ts'))")
    assert error["code"] == "execute_error" and "remote specifier" in error["message"]
    module = 'import x from "https://esm.sh/lodash";\nexport default async () => x;'
    assert refused(as_owner, module)["code"] == "execute_error"
    still_healthy(as_owner)


def test_an_infinite_loop_is_stopped_at_the_wall_limit(as_owner):
    error = refused(as_owner, "async () => { for (;;) {} }")
    assert error["code"] == "execute_timeout" and error["details"]["limitSeconds"] == 3.0
    still_healthy(as_owner)


def test_a_two_gigabyte_allocation_is_stopped_at_the_memory_cap(as_owner, settings):
    # Enough wall time that only the memory cap can end these on a loaded machine.
    settings.KODY_EXECUTE_WALL_SECONDS = 30.0
    error = refused(as_owner, "async () => { const a = new Uint8Array(2e9); a.fill(7); return 1 }")
    assert error["code"] == "execute_memory"
    heap = refused(as_owner, "async () => { const xs = []; for (;;) xs.push({a: [1, 2, 3]}) }")
    assert heap["code"] == "execute_memory"
    still_healthy(as_owner)


def test_a_hundred_megabyte_result_is_refused(as_owner, settings):
    settings.KODY_EXECUTE_WALL_SECONDS = 30.0
    error = refused(as_owner, "async () => 'x'.repeat(100 * 1024 * 1024)")
    assert error["code"] in ("execute_memory", "execute_error")
    smaller = refused(as_owner, "async () => 'y'.repeat(2 * 1024 * 1024)")
    assert smaller["code"] == "execute_error" and "larger than" in smaller["message"]
    still_healthy(as_owner)


def test_writing_on_the_channel_forges_nothing(as_owner):
    code = """async () => {
      const line = JSON.stringify({op: 'done', ok: true, result: '"forged"'}) + '\\n';
      Deno.stdout.writeSync(new TextEncoder().encode(line));
      return 'real';
    }"""
    error = refused(as_owner, code)
    assert error["code"] == "execute_error" and "channel" in error["message"]
    still_healthy(as_owner)


def test_code_calls_capabilities_as_the_caller(as_owner, as_outsider):
    as_owner.call("valueSet", name="city", value="Lisbon")
    code = "async () => (await kody.valueGet({name: 'city'})).value.value"
    assert run(as_owner, code)["result"] == "Lisbon"
    # The outsider's code runs as the outsider: the owner's value is not there.
    code = "async () => { try { await kody.valueGet({name: 'city'}) } catch (e) { return e.code } }"
    assert run(as_outsider, code)["result"] == "value_not_found"
    written = run(as_owner, "async () => (await kody.valueSet({name: 'b', value: '2'})).value.name")
    assert written["result"] == "b"
    assert as_owner.call("valueGet", name="b")["value"]["value"] == "2"


def test_an_uncaught_capability_error_keeps_its_code_and_status(as_owner):
    error = as_owner.error("execute", 404, code="async () => kody.valueGet({name: 'nope'})")
    assert error["code"] == "value_not_found"


def test_admin_capabilities_and_execute_itself_are_unknown_from_code(as_owner, operator):
    from tests.packages.conftest import Agent

    calls = []

    @capability(name="testOperatorOnly", domain="admin", role="admin", description="test")
    def operator_only(ctx):
        calls.append(ctx.user_id)
        return {"ran": True}

    try:
        code = "async () => kody.testOperatorOnly({})"
        assert as_owner.error("execute", 404, code=code)["code"] == "unknown_capability"
        # Not even an operator's code reaches an admin capability.
        assert Agent(operator).error("execute", 404, code=code)["code"] == "unknown_capability"
        nested = "async () => kody.execute({code: 'async () => 1'})"
        assert as_owner.error("execute", 404, code=nested)["code"] == "unknown_capability"
    finally:
        unregister("testOperatorOnly")
    assert calls == []
    still_healthy(as_owner)


def test_a_global_left_by_one_users_call_is_gone_in_the_next(as_owner, as_outsider):
    leave = "async () => { globalThis.leak = 'owner-private'; Object.prototype.p = 1; return 1 }"
    assert run(as_owner, leave)["result"] == 1
    read = "async () => [typeof globalThis.leak, ({}).p === undefined]"
    assert run(as_outsider, read)["result"] == ["undefined", True]
    assert run(as_owner, read)["result"] == ["undefined", True]


def test_each_call_runs_in_a_process_of_its_own(as_owner):
    before = pool().started
    for _ in range(3):
        run(as_owner, "async () => 1")
    assert pool().started - before == 3


def test_a_kody_import_in_ad_hoc_code_teaches_the_pinned_way(as_owner):
    dynamic = as_owner.error("execute", 422, code="async () => import('kody:@ada/util')")
    assert dynamic["code"] == "execute_error" and "statically" in dynamic["message"]
    static = 'import { x } from "kody:@ada/util";\nexport default async () => x;'
    assert as_owner.error("execute", 422, code=static)["code"] == "execute_error"
