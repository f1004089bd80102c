"""The operator's System health page and its JSON twin, and the lane run records behind it."""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.db.models import F
from django.urls import reverse
from django.utils import timezone

from apps.accounts.models import User
from kody import health
from kody.actors.fence import ShardEpoch
from kody.lanes import Cadence, Lane, LaneRun, LockContention, registry, run_lane
from kody.lanes.models import LaneRunRecord
from kody.userschema import schema_version
from kody.userschema.models import UserSchema
from tests.accounts.factories import UserFactory
from tests.kernel.sample_actors import Probe

PAGE = "/admin/health/"
JSON = "/admin/health.json"
# The page reads both databases.
pytestmark = pytest.mark.django_db(databases=["default", "audit"])

SECTIONS = ("databases", "user_schemas", "queues", "lanes", "blobs")


def make_user(name: str, **extra: object) -> User:
    return UserFactory(username=name, **extra)


@pytest.fixture
def staff_client(client, db):  # type: ignore[no-untyped-def]
    client.force_login(make_user("operator", is_staff=True))
    return client


@pytest.fixture
def lanes(monkeypatch):  # type: ignore[no-untyped-def]
    registry.autodiscover()

    def add(name: str, fn, cadence: Cadence = Cadence.EVERY_TICK, **options) -> None:  # type: ignore[no-untyped-def]
        monkeypatch.setitem(registry._lanes, name, Lane(name, cadence, fn, **options))

    return add


# --- access ---------------------------------------------------------------------------------


def test_the_urls_live_in_the_admin_namespace():
    assert reverse("admin:kody_health") == PAGE
    assert reverse("admin:kody_health_json") == JSON


def test_staff_sees_every_section(staff_client):
    response = staff_client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    for section in ("databases", "user-schemas", "queues", "lanes", "blobs"):
        assert f'id="health-{section}"' in html
    assert '<th scope="col">' in html and "<caption" in html
    assert "actors.shard-0" in html and "actor_alarms" in html


def test_the_admin_index_links_to_the_page(staff_client):
    response = staff_client.get(reverse("admin:index"))
    assert response.status_code == 200
    assert f'href="{PAGE}"' in response.content.decode()


def test_anonymous_is_sent_to_the_admin_login(client, db):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert client.get(JSON).status_code == 403


def test_a_non_staff_user_is_sent_to_the_admin_login(client, db):
    client.force_login(make_user("plain"))
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("admin:login"))
    assert client.get(JSON).status_code == 403


# --- lane run records -----------------------------------------------------------------------


def test_a_successful_run_is_recorded(lanes, db):
    def two_batches(run: LaneRun) -> None:
        run.record(3)
        run.record(4)

    lanes("test_health_ok", two_batches)
    run_lane("test_health_ok")
    run_lane("test_health_ok")
    record = LaneRunRecord.objects.get(lane="test_health_ok")
    assert record.last_status == "ok"
    assert (record.last_items, record.last_batches) == (7, 2)
    assert record.total_runs == 2 and record.consecutive_failures == 0
    assert record.last_error_class == "" and record.last_duration_ms is not None
    assert record.last_started_at <= record.last_finished_at
    assert record.last_budget_exhausted is False


def test_a_failed_run_records_the_error_class_not_the_message(lanes, db):
    secret = "subject: lunch with alice@example.test"

    def broken(run: LaneRun) -> None:
        run.record(1)
        raise ValueError(secret)

    lanes("test_health_broken", broken)
    for _ in range(2):
        with pytest.raises(ValueError):
            run_lane("test_health_broken")
    record = LaneRunRecord.objects.get(lane="test_health_broken")
    assert record.last_status == "failed"
    assert record.last_error_class == "ValueError"
    assert record.consecutive_failures == 2 and record.total_runs == 2
    assert record.last_items == 1
    stored = " ".join(str(value) for value in LaneRunRecord.objects.values_list().get())
    assert secret not in stored and "alice" not in stored

    lanes("test_health_broken", lambda run: None)
    run_lane("test_health_broken")
    record.refresh_from_db()
    assert (record.last_status, record.consecutive_failures, record.last_error_class) == (
        "ok",
        0,
        "",
    )


def test_lock_contention_is_recorded_as_retrying(lanes, db):
    def contended(run: LaneRun) -> None:
        raise LockContention("lost the race")

    lanes("test_health_contended", contended)
    with pytest.raises(LockContention):
        run_lane("test_health_contended", attempt=1)
    assert LaneRunRecord.objects.get(lane="test_health_contended").last_status == "retrying"
    with pytest.raises(LockContention):
        run_lane("test_health_contended", attempt=4)  # the task gives up after this one
    assert LaneRunRecord.objects.get(lane="test_health_contended").last_status == "failed"


def test_a_failed_record_write_does_not_break_the_lane(lanes, db, caplog):
    ran: list[int] = []
    lanes("test_health_no_table", lambda run: ran.append(1))
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE kody_lane_runs RENAME TO kody_lane_runs_away")
    try:
        assert run_lane("test_health_no_table") is not None
    finally:
        with connection.cursor() as cursor:
            cursor.execute("ALTER TABLE kody_lane_runs_away RENAME TO kody_lane_runs")
    assert ran == [1]
    assert "run record not written (ProgrammingError)" in caplog.text


def test_the_page_shows_lane_runs_and_retired_lanes(lanes, staff_client):
    lanes("test_health_shown", lambda run: run.record(5))
    lanes("test_health_gone", None, cadence=Cadence.RETIRED)
    run_lane("test_health_shown")
    rows = {row["name"]: row for row in health.report()["lanes"]["lanes"]}
    assert rows["test_health_shown"]["last_status"] == "ok"
    assert rows["test_health_shown"]["last_items"] == 5
    assert rows["test_health_gone"]["retired"] is True
    assert rows["test_health_gone"]["last_status"] is None
    html = staff_client.get(PAGE).content.decode()
    assert "test_health_shown" in html and "retired" in html


# --- schemas and alarms ---------------------------------------------------------------------


@pytest.mark.django_db(transaction=True, databases=["default", "audit"])
def test_an_old_schema_needs_upgrade_and_a_due_alarm_counts(owner_id, inline_actors, client):
    Probe.call(owner_id, "wake_in", -120)
    UserSchema.objects.filter(user_id=owner_id).update(version=F("version") - 1)
    schema = UserSchema.objects.get(user_id=owner_id)

    section = health.report()["user_schemas"]
    assert section["available"] is True
    assert section["current_version"] == schema_version()
    assert section["total"] == 1 and section["needs_upgrade"] == 1
    assert section["by_version"] == [{"version": schema.version, "count": 1, "needs_upgrade": True}]
    assert section["due_alarms"] == 1
    assert section["oldest_due_alarm_age_seconds"] >= 119

    client.force_login(make_user("operator", is_staff=True))
    html = client.get(PAGE).content.decode()
    assert "needs upgrade" in html
    # Counts only: nothing that names the user.
    for identifier in (owner_id, schema.schema_name):
        assert identifier not in html
        assert identifier not in client.get(JSON).content.decode()


def test_an_alarm_not_yet_due_is_not_counted(db):
    later = timezone.now() + timedelta(hours=1)
    UserSchema.objects.create(
        user_id="x" * 64, schema_name="u_" + "0" * 60, version=1, alarm_at=later
    )
    section = health.user_schemas()
    assert section["due_alarms"] == 0 and section["oldest_due_alarm_age_seconds"] is None


# --- JSON -----------------------------------------------------------------------------------


def test_the_json_twin_has_the_same_sections(staff_client):
    response = staff_client.get(JSON)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "no-cache" in response["Cache-Control"]
    data = response.json()
    assert set(SECTIONS) <= set(data)
    assert all(data[name]["available"] is True for name in SECTIONS), data
    assert set(data["databases"]["databases"]) == {"default", "audit"}
    for db in data["databases"]["databases"].values():
        assert db["server_version"] and isinstance(db["pending_migrations"], int)
    assert [shard["queue"] for shard in data["queues"]["shards"]] == [
        f"actors.shard-{n}" for n in range(data["actor_shards"])
    ]
    assert {"queue", "depth", "inflight", "consumer"} == set(data["queues"]["shards"][0])
    assert data["queues"]["celery"][0]["queue"] == "default"
    assert {"total", "current_version", "needs_upgrade", "by_version", "due_alarms"} <= set(
        data["user_schemas"]
    )
    lane = next(row for row in data["lanes"]["lanes"] if row["name"] == "actor_alarms")
    assert {
        "cadence",
        "last_status",
        "last_items",
        "last_duration_ms",
        "consecutive_failures",
    } <= set(lane)
    assert {b["bucket"]: b["backend"] for b in data["blobs"]["buckets"]}["email_blobs"] in (
        "filesystem",
        "s3",
    )


def test_the_tests_databases_have_no_pending_migrations(db):
    for alias, section in health.databases()["databases"].items():
        assert section["pending_migrations"] == 0, alias


class _FakeBroker:
    """Answers LLEN/EXISTS from a dict, so depths are checked without touching a shared Redis."""

    def __init__(self, lists: dict[str, int], keys: set[str]) -> None:
        self.lists, self.keys, self.replies = lists, keys, []

    def pipeline(self, transaction: bool = True) -> _FakeBroker:
        self.replies = []
        return self

    def llen(self, key: str) -> None:
        self.replies.append(self.lists.get(key, 0))

    def exists(self, key: str) -> None:
        self.replies.append(int(key in self.keys))

    def execute(self) -> list[int]:
        return self.replies


def test_queue_depths_read_the_transport_and_kombu_keys(monkeypatch, settings, db):
    settings.KODY_ACTOR_SHARDS = 2
    fake = _FakeBroker(
        {
            "{actors.shard-1}": 5,
            "{actors.shard-1}.inflight": 2,
            "default": 3,
            "default\x06\x163": 4,
            # Beyond the count (ADR 0041): a shard nothing drains any more, and one far out
            # that only its epoch row names.
            "{actors.shard-3}": 4,
            "{actors.shard-70}.inflight": 1,
        },
        {"{actors.shard-0}.lease", "{actors.shard-70}.lease"},
    )
    ShardEpoch.objects.create(shard=70, epoch=1)
    monkeypatch.setattr(health, "broker_client", lambda: fake)
    section = health.queues()
    assert section["shards"] == [
        {"queue": "actors.shard-0", "depth": 0, "inflight": 0, "consumer": True},
        {"queue": "actors.shard-1", "depth": 5, "inflight": 2, "consumer": False},
    ]
    assert section["celery"] == [{"queue": "default", "depth": 7}]
    assert section["stranded"] == [
        {"queue": "actors.shard-3", "depth": 4, "inflight": 0, "consumer": False},
        {"queue": "actors.shard-70", "depth": 0, "inflight": 1, "consumer": True},
    ]


# --- failing soft ---------------------------------------------------------------------------


class _DeadRedis:
    def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
        def fail(*args: object, **kwargs: object) -> None:
            raise redis.ConnectionError("connection refused")

        return fail


def test_an_unreachable_broker_marks_only_the_queues_unavailable(staff_client, monkeypatch):
    monkeypatch.setattr(health, "broker_client", lambda: _DeadRedis())
    response = staff_client.get(PAGE)
    assert response.status_code == 200
    html = response.content.decode()
    assert "the broker could not be read (ConnectionError)" in html
    assert "actor_alarms" in html and "reachable" in html  # the other sections still render
    data = staff_client.get(JSON).json()
    assert data["queues"] == {"available": False, "error": "ConnectionError"}
    assert data["lanes"]["available"] and data["databases"]["available"]


def test_a_broker_at_a_dead_address_fails_soft(staff_client, settings):
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"
    data = staff_client.get(JSON).json()
    assert data["queues"]["available"] is False
    assert data["user_schemas"]["available"] is True
