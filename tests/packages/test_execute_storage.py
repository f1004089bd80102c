"""Storage as code sees it: ``storage.*`` is the call's own bucket — new per ad hoc call,
shared by a package's runs — and one user's bucket is never another's. Plus bulk run triage
and the coding guide."""

from __future__ import annotations

import pytest

from tests.packages.test_package_exports import DECLARE, publish

pytestmark = pytest.mark.django_db(databases=["default", "audit"])

REMEMBER = """async (p) => {
  const before = await storage.get("seen");
  await storage.set("seen", p.mark);
  const listed = await storage.list();
  return { before, now: await storage.get("seen"), keys: listed.keys ?? listed.entries ?? listed };
}"""


def test_ad_hoc_code_gets_a_fresh_exec_bucket_every_call(as_owner):
    first = as_owner.call("execute", code=REMEMBER, params={"mark": "a"})["result"]
    assert first["before"] is None and first["now"] == "a"
    second = as_owner.call("execute", code=REMEMBER, params={"mark": "b"})["result"]
    assert second["before"] is None  # exec:{uuid} is new for every call


def test_a_packages_runs_share_its_bucket_and_only_its_owner_sees_it(as_owner, as_outsider):
    body = DECLARE + (
        "declare const storage: { get(k: string): Promise<unknown>;"
        " set(k: string, v: unknown): Promise<unknown> };\n"
        "export default async () => {\n"
        "  const n = Number(await storage.get('n') ?? 0) + 1;\n"
        "  await storage.set('n', n);\n  return n;\n};\n"
    )
    package = publish(as_owner, "tally", {"mod.ts": body}, {".": "./mod.ts"})
    raw = as_owner.call("packageInvocationTokenCreate", packageId=package["id"], name="t")["secret"]
    from tests.packages.test_package_exports import invoke

    assert invoke(package["id"], "default", raw).json()["result"] == 1
    assert invoke(package["id"], "default", raw).json()["result"] == 2
    bucket = f"package:{package['id']}"
    assert as_owner.call("storageGet", storageId=bucket, key="n")["value"] == 2
    assert as_outsider.call("storageGet", storageId=bucket, key="n") == {
        "found": False,
        "value": None,
    }
    peek = f"async () => (await kody.storageGet({{storageId: '{bucket}', key: 'n'}})).found"
    assert as_outsider.call("execute", code=peek)["result"] is False


def test_runs_are_triaged_in_bulk_by_their_owner_only(as_owner, as_outsider):
    body = "export default () => { throw new Error('nope'); };\n"
    package = publish(as_owner, "failing", {"mod.ts": body}, {".": "./mod.ts"})
    raw = as_owner.call("packageInvocationTokenCreate", packageId=package["id"], name="t")["secret"]
    from tests.packages.test_package_exports import invoke

    for _ in range(2):
        assert invoke(package["id"], "default", raw).status_code == 422
    run_ids = [r["id"] for r in as_owner.call("runList")["runs"]]
    assert len(run_ids) == 2
    theirs = as_outsider.call("runUpdateBulk", runIds=run_ids, errorTriage="ignored")
    assert theirs == {"runs": [], "missing": run_ids}
    mine = as_owner.call("runUpdateBulk", runIds=[*run_ids, "missing-run"], errorTriage="ignored")
    assert sorted(r["id"] for r in mine["runs"]) == sorted(run_ids)
    assert all(r["errorTriage"] == "ignored" for r in mine["runs"])
    assert mine["missing"] == ["missing-run"]


def test_the_coding_guide_is_served(as_owner):
    guide = as_owner.call("codingGuideGet")
    assert guide["format"] == "markdown" and "kody:@scope/name" in guide["guide"]


def test_storage_query_reads_only_the_callers_bucket(as_owner, as_outsider, owner):
    for key, value in [("a", {"n": 1}), ("b", {"n": 2}), ("c", {"n": 3})]:
        as_owner.call("storageSet", storageId="job:j1", key=key, value=value)
    as_owner.call("storageSet", storageId="job:other", key="z", value={"n": 99})
    as_outsider.call("storageSet", storageId="job:j1", key="x", value={"n": 1000})
    sql = "SELECT key, (value->>'n')::int AS n FROM bucket WHERE (value->>'n')::int >= $1"
    got = as_owner.call("storageQuery", storageId="job:j1", sql=sql + " ORDER BY key", params=[2])
    assert got == {"rows": [{"key": "b", "n": 2}, {"key": "c", "n": 3}], "truncated": False}
    total = "SELECT sum((value->>'n')::int) AS s FROM bucket"
    theirs = as_outsider.call("storageQuery", storageId="job:j1", sql=total)
    assert theirs["rows"] == [{"s": 1000}]

    # Nothing outside the bucket: not the storage table, not public tables, not a script.
    for escape in [
        "SELECT * FROM storage_entries",
        "SELECT * FROM public.users",
        "SELECT * FROM jobs",
        "SELECT 1) AS q; DELETE FROM bucket; SELECT (1",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT pg_sleep(5)",
    ]:
        error = as_owner.error("storageQuery", 422, storageId="job:j1", sql=escape)
        assert error["code"] == "storage_query_failed", escape
    # The connection is back to normal afterwards: writes work.
    as_owner.call("storageSet", storageId="job:j1", key="d", value={"n": 4})
    code = "async () => (await storage.query('SELECT count(*) AS c FROM bucket')).rows[0].c"
    assert as_owner.call("execute", code=code)["result"] == 0  # exec:{uuid} is empty
