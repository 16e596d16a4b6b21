"""Shutdown and the limits on clients that have not logged in, on real MariaDB.

* On drain, idle sessions close at once, TLS or not; a session in a transaction may finish it.
* A flood of unauthenticated sockets from one address (4,096) cannot lock out logins from
  another address, nor can many addresses together (the global limit makes room).
* The handshake has a deadline (``connect_timeout``): idle and slow clients are cut at it.

Loopback addresses other than 127.0.0.1 (127.0.0.2, 127.0.0.3) stand for other clients; the
proxy listens on 127.0.0.1 only.  Bounds in seconds are generous on purpose (a shared, noisy
machine): they separate "at once" from "after the deadline", not fast from slow.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from consistent.testing.mariadb import MariaDBTopology
from consistent.testing.pytest_plugin import CleanDatabase
from proxy.admission import LoginGate
from proxy.config import parse
from proxy.stream import PacketEndpoint
from proxy.testing import ProxyThread

from .conftest import self_signed, topology_config

FLOOD = 4096
PATIENCE = 60.0  # seconds the proxy may take to get through a flood on a loaded machine


def one(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


def login(port: int, source: str = "127.0.0.1", **kwargs: Any) -> Any:
    return pymysql.connect(
        host="127.0.0.1",
        port=port,
        user="app",
        password="app-secret",
        bind_address=source,
        connect_timeout=10,
        autocommit=True,
        **kwargs,
    )


def wait_until(predicate: Callable[[], bool], what: str, timeout: float = PATIENCE) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@contextlib.contextmanager
def idle_sockets(port: int, count: int, source: str) -> Iterator[list[socket.socket]]:
    """``count`` connections from ``source`` that never say anything."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.setblocking(False)
            s.bind((source, 0))
            s.connect_ex(("127.0.0.1", port))
            sockets.append(s)
        yield sockets
    finally:
        for s in sockets:
            s.close()


def _ended(sock: socket.socket) -> bool:
    """Whether the proxy closed ``sock`` (what it sent before is read and dropped)."""
    try:
        while chunk := sock.recv(4096):
            del chunk
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


# ----------------------------------------------------------------- shutdown


def test_drain_closes_idle_sessions_at_once_tls_or_not(
    mariadb_topology: MariaDBTopology, mariadb_database: CleanDatabase, tmp_path: Path
) -> None:
    cert, key = self_signed(tmp_path)
    config = parse(
        topology_config(
            mariadb_topology, tls={"cert": str(cert), "key": str(key)}, shutdown_timeout=60.0
        )
    )
    # The deadline is a minute: if an idle session had to wait for it, the test would show.
    proxy = ProxyThread(config, shutdown_timeout=60.0).start()
    port = proxy.port
    tls = login(port, database=mariadb_database.name, ssl_ca=str(cert))
    plain = login(port, database=mariadb_database.name, ssl_disabled=True)
    writer = login(port, database=mariadb_database.name, ssl_ca=str(cert))
    try:
        assert proxy.run(lambda: sorted(s.tls for s in proxy.server.sessions.values())) == [
            False,
            True,
            True,
        ]
        one(writer, "CREATE TABLE t (a INT)")
        one(writer, "BEGIN")
        one(writer, "INSERT INTO t VALUES (1)")
        started = time.monotonic()
        stopper = threading.Thread(target=proxy.stop)
        stopper.start()
        wait_until(lambda: proxy.run(lambda: len(proxy.server.sessions)) == 1, "idle sessions")
        for idle in (tls, plain):
            with pytest.raises(pymysql.err.OperationalError):
                one(idle, "SELECT 1")
        one(writer, "INSERT INTO t VALUES (2)")  # the transaction may finish…
        one(writer, "COMMIT")  # …and the session closes with it
        stopper.join(PATIENCE)
        elapsed = time.monotonic() - started
        assert not stopper.is_alive()
        assert elapsed < 30.0, f"shutdown took {elapsed:.1f} s: it waited for the deadline"
        rows = mariadb_topology.primary.query(
            f"SELECT COUNT(*) AS n FROM {mariadb_database.name}.t"
        )
        assert rows == [{"n": 2}]
    finally:
        for conn in (tls, plain, writer):
            with contextlib.suppress(pymysql.err.Error):
                conn.close()
        proxy.stop()


# ----------------------------------------------------------------- unauthenticated clients


def test_a_flood_from_one_address_leaves_room_for_others(
    make_proxy: Callable[..., ProxyThread],
) -> None:
    proxy = make_proxy()
    gate = proxy.run(lambda: proxy.server.login_gate)
    per_address = proxy.server.config.max_unauthenticated_per_address

    def handled() -> bool:
        metrics = proxy.server.metrics
        return metrics.connections_refused + gate.pending_from("127.0.0.1") >= FLOOD

    with idle_sockets(proxy.port, FLOOD, "127.0.0.1"):
        wait_until(lambda: proxy.run(handled), "the flood to be handled")
        assert proxy.run(lambda: gate.pending_from("127.0.0.1")) == per_address
        # Another address logs in at once; the flooding one is refused, not kept waiting.
        conn = login(proxy.port, source="127.0.0.2")
        try:
            assert one(conn, "SELECT 40 + 2") == (42,)
        finally:
            conn.close()
        with pytest.raises(pymysql.err.OperationalError) as info:
            login(proxy.port, source="127.0.0.1")
        assert info.value.args[0] == 1040


def test_the_global_limit_makes_room_for_a_new_address(
    make_proxy: Callable[..., ProxyThread],
) -> None:
    proxy = make_proxy(max_unauthenticated=8, max_unauthenticated_per_address=8)
    gate = proxy.run(lambda: proxy.server.login_gate)
    with idle_sockets(proxy.port, 8, "127.0.0.3") as held:
        wait_until(lambda: proxy.run(lambda: gate.pending) == 8, "the idle logins")
        conn = login(proxy.port, source="127.0.0.2")  # takes the place of the oldest
        try:
            assert one(conn, "SELECT 1") == (1,)
        finally:
            conn.close()
        assert proxy.run(lambda: gate.pending_from("127.0.0.3")) == 7
        # The evicted connection was closed by the proxy (after its greeting).
        wait_until(lambda: any(_ended(s) for s in held), "the evicted connection to close")
        # The one free place, then nothing: the busiest address takes no one's place.
        with idle_sockets(proxy.port, 2, "127.0.0.3"):
            wait_until(
                lambda: proxy.run(lambda: proxy.server.metrics.connections_refused) == 1,
                "the refusal",
            )
            assert proxy.run(lambda: gate.pending_from("127.0.0.3")) == 8


def test_the_handshake_has_a_deadline(make_proxy: Callable[..., ProxyThread]) -> None:
    proxy = make_proxy(connect_timeout=1.0)
    started = time.monotonic()
    address = ("127.0.0.1", proxy.port)
    with (
        socket.create_connection(address, timeout=PATIENCE) as silent,
        socket.create_connection(address, timeout=PATIENCE) as slow,
    ):
        slow.recv(4096)  # the greeting
        for sock in (silent, slow):
            sock.setblocking(False)

        def both_cut() -> bool:
            with contextlib.suppress(OSError):
                slow.send(b"\x01")  # a slowloris: one byte at a time, never a whole packet
            return _ended(silent) and _ended(slow)

        wait_until(both_cut, "the proxy to cut clients that never log in")
    assert time.monotonic() - started < 30.0  # the deadline is 1 s, not the test's patience
    assert proxy.run(lambda: proxy.server.metrics.handshake_timeouts) == 2
    conn = login(proxy.port)  # and the proxy serves logins as before
    conn.close()


# ----------------------------------------------------------------- the gate alone


def test_login_gate_rules() -> None:
    eps = [PacketEndpoint(max_payload=1024) for _ in range(6)]
    gate = LoginGate(total=4, per_address=3)
    assert all(gate.admit("a", ep).admitted for ep in eps[:3])
    refused = gate.admit("a", eps[3])
    assert not refused.admitted
    assert "from a" in refused.reason
    assert gate.admit("b", eps[3]).admitted
    assert gate.pending == 4
    # Full: "c" has fewer logins in progress than "a", the busiest: a's oldest makes room.
    made_room = gate.admit("c", eps[4])
    assert made_room.admitted
    assert made_room.evicted is eps[0]
    assert (gate.pending_from("a"), gate.pending) == (2, 4)
    # Still full; "a" and "b"/"c" now hold 2 and 1: "b" takes one of a's, "a" gets nothing.
    assert not gate.admit("a", eps[5]).admitted
    gate.done("a", eps[0])  # the evicted one's end changes nothing
    assert gate.pending == 4
    gate.done("b", eps[3])
    assert (gate.pending, gate.pending_from("b")) == (3, 0)
