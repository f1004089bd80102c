"""The shard transport's hot path: what a call costs in Redis commands and round trips.

Each test runs on a Redis of its own (``private_redis``, started like the embedded one), so
``INFO commandstats`` counts only what the test did. A caller's ``call()`` is one write and
one read on its thread's ``transport.Line`` (LPUSH and BLPOP, nothing else: no pool health
check, no HELLO), and the line reads any reply whole, however it arrives. The consumer's side
is in ``test_shard_round_trips.py``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from kody import embedded
from kody.actors import ActorCallTimeout, ActorUnavailable, transport
from kody.actors.wire import Call, Outcome
from tests.kernel.redis_counts import client_reply, commands
from tests.kernel.sample_actors import Probe

pytestmark = [pytest.mark.queue]


class Responder(threading.Thread):
    """Answers every call on shard 0 with its own id: a worker without a database."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.client = redis.Redis.from_url(url)
        # Connected now, so what redis-py sends on connecting (HELLO, CLIENT SETINFO) is
        # counted before a test resets the stats, never as the caller's commands.
        self.client.ping()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            got = self.client.brpop([transport.queue_key(0)], timeout=0.2)
            if got is None:
                continue
            call = Call.decode(got[1])
            self.client.rpush(
                transport.reply_key(0, call.id), Outcome.success({"id": call.id}).text
            )


def test_a_call_is_two_commands_in_one_write_on_the_callers_side(private_redis, monkeypatch):
    url, _, admin = private_redis
    responder = Responder(url)
    responder.start()
    writes: list[int] = []
    payloads: list[bytes] = []
    send = transport.Line.send_packed

    def counted(self: transport.Line, payload: bytes, count: int, **options: bool) -> list[object]:
        writes.append(count)
        payloads.append(payload)
        return send(self, payload, count, **options)

    monkeypatch.setattr(transport.Line, "send_packed", counted)
    try:
        Probe.call("warm" * 8, "whoami", timeout=10)  # connects the line
        admin.config_resetstat()
        writes.clear()
        for n in range(20):
            assert Probe.call(f"user{n:04d}" * 4, "whoami", timeout=10)["id"]
        spent = commands(admin)
    finally:
        responder.stop.set()
        responder.join(timeout=5)
    # One write per call, one reply read back: the push's own is skipped (ADR 0035).
    assert writes == [1] * 20
    # Packed by one format, byte for byte what the generic packer makes of the commands.
    call = Call.decode(payloads[-1].split(b"\r\n")[13])
    assert payloads[-1] == b"".join(
        transport._pack(command)
        for command in (
            ["CLIENT", "REPLY", "SKIP"],
            ["LPUSH", transport.queue_key(0), call.encode()],
            ["BLPOP", transport.reply_key(0, call.id), 10.0],
        )
    )
    # The caller: CLIENT REPLY SKIP, LPUSH and BLPOP per call; the responder: BRPOP and
    # RPUSH. Nothing else (no HELLO, PING from a pool; config resetstat is not counted).
    # (The responder's BRPOP count depends on its timing: taken as it is.)
    assert spent == {
        client_reply(admin): 20,
        "lpush": 20,
        "blpop": 20,
        "brpop": spent["brpop"],
        "rpush": 20,
    }


def _acl_url(url: str, admin: redis.Redis, *, client: bool) -> str:
    """A user of the private Redis that may (or may not) run CLIENT, and its URL."""
    admin.acl_setuser(
        "caller",
        enabled=True,
        reset=True,
        passwords=["+pw"],
        keys=["*"],
        categories=["+@all"],
        commands=[] if client else ["-client"],
    )
    return url.replace("unix://", "unix://caller:pw@")


def test_a_server_refusing_client_reply_gets_both_replies_read(private_redis, settings):
    url, _, admin = private_redis
    settings.KODY_ACTOR_REDIS_URL = _acl_url(url, admin, client=False)
    responder = Responder(url)
    responder.start()
    try:
        line = transport.line()
        assert line is not None and not line.connected().skips
        admin.config_resetstat()
        for n in range(5):
            assert Probe.call(f"acl{n:05d}" * 4, "whoami", timeout=10)["id"]
        spent = commands(admin)
    finally:
        responder.stop.set()
        responder.join(timeout=5)
    assert client_reply(admin) not in spent
    assert spent["lpush"] == spent["blpop"] == 5


def test_a_skip_refused_after_connecting_is_an_outage_then_the_line_recovers(
    private_redis, settings
):
    url, _, admin = private_redis
    settings.KODY_ACTOR_REDIS_URL = _acl_url(url, admin, client=True)
    responder = Responder(url)
    responder.start()
    try:
        assert Probe.call("acl1" * 8, "whoami", timeout=10)["id"]
        line = transport.line()
        assert line is not None and line.skips
        _acl_url(url, admin, client=False)  # CLIENT revoked under the open line
        with pytest.raises(ActorUnavailable):
            Probe.call("acl2" * 8, "whoami", timeout=10, idempotency_key="k3")
        assert line.sock is None  # the replies still to come are not read as the next call's
        assert Probe.call("acl3" * 8, "whoami", timeout=10)["id"]
        assert not line.skips
    finally:
        responder.stop.set()
        responder.join(timeout=5)


def test_a_push_refused_for_memory_is_a_timeout_naming_the_key(private_redis):
    """The price of the skipped reply: a push Redis refuses (out of memory under
    ``noeviction``) is not seen, so the caller waits out its timeout; nothing was queued,
    and retrying with the key applies the call once."""
    _, _, admin = private_redis
    assert transport.line().connected().skips  # type: ignore[union-attr]
    admin.config_set("maxmemory-policy", "noeviction")
    admin.config_set("maxmemory", 1)
    try:
        with pytest.raises(ActorCallTimeout) as caught:
            Probe.call("oom1" * 8, "whoami", timeout=0.3, idempotency_key="k4")
    finally:
        admin.config_set("maxmemory", 0)
    assert caught.value.call_id == "k4"
    assert admin.llen(transport.queue_key(0)) == 0


def test_a_cast_is_one_command_packed_as_the_generic_packer_would(private_redis, monkeypatch):
    payloads: list[bytes] = []
    send = transport.Line.send_packed

    def kept(self: transport.Line, payload: bytes, count: int, **options: bool) -> list[object]:
        payloads.append(payload)
        return send(self, payload, count, **options)

    monkeypatch.setattr(transport.Line, "send_packed", kept)
    transport.push(0, '{"x":"\u00e9"}')
    assert payloads == [transport._pack(["LPUSH", transport.queue_key(0), '{"x":"\u00e9"}'])]


def _dribbling_line(tmp_path: Path, answer: bytes, name: str = "dribble") -> transport.Line:
    """A ``Line`` to a fake server that answers any write with ``answer``, one byte per
    packet: every reply arrives cut at every possible place."""
    import socket as socketlib

    path = tmp_path / f"{name}.sock"
    server = socketlib.socket(socketlib.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            conn.recv(65536)
            conn.sendall(b"+OK\r\n")  # CLIENT REPLY ON, asked on connecting
            while conn.recv(65536):
                for n in range(len(answer)):
                    conn.sendall(answer[n : n + 1])
                    time.sleep(0)
        server.close()

    threading.Thread(target=serve, daemon=True).start()
    return transport.Line(f"unix://{path}")


def test_replies_cut_anywhere_parse_whole(tmp_path: Path):
    answer = (
        b":42\r\n"
        b"$5\r\nhe\r\no\r\n"  # CRLF inside a bulk string
        b"$-1\r\n"
        b"*3\r\n$1\r\na\r\n*2\r\n:1\r\n*-1\r\n+OK\r\n"
        b"*0\r\n"
        b"$0\r\n\r\n"
        b"+PONG\r\n"
    )
    line = _dribbling_line(tmp_path, answer)
    try:
        replies = line.send(*[["PING"]] * 7)
        assert replies == [42, b"he\r\no", None, [b"a", [1, None], b"OK"], [], b"", b"PONG"]
        assert line.pos == len(line.buf)  # nothing left over for the next exchange
    finally:
        line.close()


def test_an_error_inside_an_array_is_typed_and_a_bad_reply_closes_the_line(tmp_path: Path):
    line = _dribbling_line(tmp_path, b"*2\r\n:1\r\n-WRONGTYPE no\r\n")
    try:
        (reply,) = line.send(["PING"])
        assert reply[0] == 1 and isinstance(reply[1], redis.ResponseError)
    finally:
        line.close()
    line = _dribbling_line(tmp_path, b"?1\r\n", "bad")
    with pytest.raises(redis.ConnectionError, match="unexpected reply"):
        line.send(["PING"])
    assert line.sock is None


def test_a_reply_in_bytes_unwraps_as_utf_8():
    from kody.actors.wire import unwrap

    assert unwrap('{"ok":true,"value":"\u00e9\\u00e9"}'.encode()) == "\u00e9\u00e9"


def test_a_cast_is_one_command(private_redis):
    _, _, admin = private_redis
    Probe.cast("warm" * 8, "bump")
    admin.config_resetstat()
    for _ in range(5):
        Probe.cast("user" * 8, "bump")
    spent = commands(admin)
    assert spent == {"lpush": 5}
    assert admin.llen(transport.queue_key(0)) == 6


def test_a_line_reconnects_once_after_the_server_restarts(private_redis):
    url, data_dir, _ = private_redis
    line = transport.line()
    assert line is not None
    assert line.send(["SET", "k", "1"]) == [b"OK"]
    embedded.stop_redis(data_dir)
    embedded.start_redis(data_dir)
    # The old socket is dead; the line notices on its write or read and resends on a new one.
    assert line.send(["INCR", "k"]) == [2]  # the append-only file kept k


def test_a_line_to_a_server_that_is_gone_raises_a_connection_error(private_redis):
    _, data_dir, _ = private_redis
    line = transport.line()
    assert line is not None
    line.send(["PING"])
    embedded.stop_redis(data_dir)
    with pytest.raises(redis.ConnectionError):
        line.send(["PING"])
    with pytest.raises(ActorUnavailable):  # what dispatch makes of it
        Probe.call("gone" * 8, "whoami", timeout=1, idempotency_key="k1")
    embedded.start_redis(data_dir)
    assert line.send(["PING"]) == [b"PONG"]


def test_an_error_reply_raises_and_leaves_the_line_usable(private_redis):
    line = transport.line()
    assert line is not None
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        line.send(["SET", "s", "x"], ["LPUSH", "s", "y"], ["GET", "s"])
    assert line.send(["GET", "s"], ["DEL", "s"], ["GET", "s"]) == [b"x", 1, None]
    big = b"\x00\r\n" * 100_000  # binary-safe, longer than one read
    assert line.send(["SET", "b", big], ["GET", "b"], ["LRANGE", "none", 0, -1]) == [
        b"OK",
        big,
        [],
    ]


def test_a_blocking_wait_that_times_out_answers_none(private_redis):
    reply = transport.push_and_wait(0, "{}", "nobody-answers", 0.05)
    assert reply is None


def test_each_thread_and_each_url_gets_its_own_line(private_redis, settings, tmp_path: Path):
    mine = transport.line()
    theirs: list[object] = []
    thread = threading.Thread(target=lambda: theirs.append(transport.line()))
    thread.start()
    thread.join()
    assert mine is transport.line()
    assert theirs[0] is not mine
    settings.KODY_ACTOR_REDIS_URL = "redis+cluster://127.0.0.1:1"
    assert transport.line() is None  # a cluster keeps redis-py's client
    settings.KODY_ACTOR_REDIS_URL = "rediss://127.0.0.1:1"
    assert transport.line() is None  # and so does TLS


def test_error_replies_are_typed_as_redis_py_types_them(private_redis):
    line = transport.line()
    assert line is not None
    with pytest.raises(redis.exceptions.NoScriptError):
        line.send(["EVALSHA", "0" * 40, 0])


def test_a_server_still_loading_is_an_outage_for_the_caller(settings, tmp_path: Path):
    """A Redis that restarted answers LOADING while it reads its append-only file: the
    caller gets ActorUnavailable (retry with the key), not a bare ResponseError."""
    import socket as socketlib

    path = tmp_path / "loading.sock"
    server = socketlib.socket(socketlib.AF_UNIX)
    server.bind(str(path))
    server.listen()

    def answer_loading() -> None:
        conn, _ = server.accept()
        with conn:
            while conn.recv(65536):
                conn.sendall(b"-LOADING Redis is loading the dataset in memory\r\n" * 2)

    thread = threading.Thread(target=answer_loading, daemon=True)
    thread.start()
    settings.KODY_ACTOR_REDIS_URL = f"unix://{path}"
    settings.KODY_ACTOR_SHARDS = 1
    settings.KODY_ACTORS_INLINE = False
    try:
        with pytest.raises(ActorUnavailable):
            Probe.call("load" * 8, "whoami", timeout=1, idempotency_key="k2")
    finally:
        server.close()
