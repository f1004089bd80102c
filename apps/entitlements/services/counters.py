"""Current use of the non-daily limits, counted where each resource lives.

Row limits count the owner's rows in their public tables; meter-backed limits ask the
UserMeter actor; resources whose authority is another app's actor (stored mail in the
Mailbox, repo sessions in RepoSessionIndex, workflows in RunLog) are counted by a function that
app registers with ``register_counter``. Until it does, the resource reports ``None``
(unknown) rather than a guess, and enforcement of that resource stays with its app.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connection

from apps.entitlements.services import metering as meter

Counter = Callable[[str], int | None]  # stable_user_id -> current use
_COUNTERS: dict[str, Counter] = {}

# resource -> (table, SQL condition with %(uid)s); every condition is owner-scoped.
_TABLE_COUNTS: dict[str, tuple[str, str]] = {
    "repos": ("user_repos", "user_id = %(uid)s"),
    "saved_packages": ("saved_packages", "user_id = %(uid)s"),
    "scheduled_jobs": ("jobs", "user_id = %(uid)s"),
    "secrets": (
        "secret_entries",
        "bucket_id IN (SELECT id FROM secret_buckets WHERE user_id = %(uid)s)",
    ),
}


def register_counter(name: str, counter: Counter) -> None:
    _COUNTERS[name] = counter


# Tables seen to exist (migrations add tables and never drop these): asked of the catalog
# until found, then never again in this process, not once per count.
_EXISTING: set[str] = set()


def _table_count(table: str, condition: str, uid: str) -> int | None:
    with connection.cursor() as cursor:
        if table not in _EXISTING:
            if table not in connection.introspection.table_names(cursor):
                return None
            _EXISTING.add(table)
        cursor.execute(f'SELECT COUNT(*) FROM "{table}" WHERE {condition}', {"uid": uid})
        return int(cursor.fetchone()[0])


def _storage_bytes(uid: str) -> int:
    from apps.entitlements.services.storage import bucket_estimate_total

    return int(meter.read_storage_bytes(uid)["bytes"]) + bucket_estimate_total(uid)


def count(uid: str, name: str) -> int | None:
    if name in _COUNTERS:
        return _COUNTERS[name](uid)
    if name == "storage_bytes":
        return _storage_bytes(uid)
    if name == "package_services":
        return int(meter.count_package_services(uid, status="running"))
    if name == "persistent_package_services":
        return int(meter.count_package_services(uid, status="running", mode="persistent"))
    if name == "email_message_bytes":
        return 0  # a per-message cap: assert_within(user, name, n=message_size)
    if name in _TABLE_COUNTS:
        return _table_count(*_TABLE_COUNTS[name], uid)
    return None
