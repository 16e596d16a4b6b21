"""Hostile clients: garbage before and after the handshake, truncated packets and lying lengths,
oversized packets, byte-at-a-time (slowloris) and many concurrent clients.

Each scenario is bounded in time (sockets have timeouts, Hypothesis runs a fixed small number
of examples without deadlines).  Throughout each one, a prober session runs ``SELECT 1`` every
few milliseconds: every answer must come within :data:`PROBE_BOUND` seconds — a generous bound
on a shared machine, where an unloaded answer takes about a millisecond and the stalls this
guards against took seconds — and the proxy must still accept a new session at the end.
"""

from __future__ import annotations

import random
import socket
import struct
import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from consistent.protocol.framing import frame_packets
from consistent.testing.mariadb import MariaDBTopology
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import connect, topology_config
from .rawclient import RawClient

#: Seconds within which the prober's every ``SELECT 1`` must be answered.
PROBE_BOUND = 2.0
#: Seconds a hostile socket waits for the proxy before giving up (a scenario's own bound).
SOCKET_TIMEOUT = 10.0
MIB = 1024 * 1024
FUZZ = settings(
    max_examples=20,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Prober:
    """A session that keeps asking ``SELECT 1`` and records the slowest answer."""

    def __init__(self, proxy: ProxyThread) -> None:
        self._conn = connect(proxy)
        self._stop = threading.Event()
        self.slowest = 0.0
        self.answers = 0
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        with self._conn.cursor() as cur:
            while not self._stop.is_set():
                started = time.monotonic()
                try:
                    cur.execute("SELECT 1")
                    assert cur.fetchall() == ((1,),)
                except BaseException as e:  # recorded, and the test fails on it
                    self.errors.append(e)
                    return
                self.slowest = max(self.slowest, time.monotonic() - started)
                self.answers += 1
                time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self._conn.close()


@pytest.fixture(scope="module")
def hostile_proxy(mariadb_topology: MariaDBTopology) -> Iterator[ProxyThread]:
    before = mariadb_topology.primary.query("SELECT @@GLOBAL.max_allowed_packet AS v")[0]["v"]
    for server in mariadb_topology.servers:
        server.query(f"SET GLOBAL max_allowed_packet = {64 * MIB}")
    proxy = ProxyThread(parse(topology_config(mariadb_topology, connect_timeout=5.0)))
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
        for server in mariadb_topology.servers:
            server.query(f"SET GLOBAL max_allowed_packet = {before}")


@pytest.fixture
def probe(hostile_proxy: ProxyThread) -> Iterator[Prober]:
    prober = Prober(hostile_proxy)
    time.sleep(0.05)
    yield prober
    prober.stop()
    assert not prober.errors, prober.errors
    assert prober.answers > 0
    assert prober.slowest < PROBE_BOUND, f"a SELECT 1 took {prober.slowest:.2f} s"
    servers = hostile_proxy.run(lambda: list(hostile_proxy.server.servers().values()))
    # The monitors kept polling on time: none saw a backend as unreachable.
    assert [s.monitor.healthy for s in servers if s.monitor is not None] == [True] * len(servers)
    after = connect(hostile_proxy)  # still up, still accepting sessions
    try:
        with after.cursor() as cur:
            cur.execute("SELECT 2")
            assert cur.fetchall() == ((2,),)
    finally:
        after.close()


HOSTILE_ADDRESS = "127.0.0.2"


def raw_socket(proxy: ProxyThread) -> socket.socket:
    """A hostile client's socket, from another loopback address than the well-behaved clients:
    the proxy's per-address login limit holds the hostile address back, not theirs."""
    sock = socket.create_connection(
        ("127.0.0.1", proxy.port), timeout=SOCKET_TIMEOUT, source_address=(HOSTILE_ADDRESS, 0)
    )
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return sock


def drain(sock: socket.socket) -> bytes:
    """Everything the proxy sends until it closes (or the socket's timeout)."""
    received = bytearray()
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            received += data
    except (TimeoutError, ConnectionError):
        pass
    return bytes(received)


def logged_in(proxy: ProxyThread) -> RawClient:
    client = RawClient(proxy.port, "app", "app-secret")
    client.sock.settimeout(SOCKET_TIMEOUT)
    return client


def packet(payload: bytes, seq: int = 0) -> bytes:
    return struct.pack("<I", len(payload) | seq << 24) + payload


# ----------------------------------------------------------------- fuzzing


@FUZZ
@given(garbage=st.binary(min_size=1, max_size=600), read_greeting=st.booleans())
def test_garbage_before_the_handshake(
    hostile_proxy: ProxyThread, probe: Prober, garbage: bytes, read_greeting: bool
) -> None:
    with raw_socket(hostile_proxy) as sock:
        if read_greeting:
            assert sock.recv(4)  # the greeting's header at least
        sock.sendall(garbage)
        sock.shutdown(socket.SHUT_WR)
        drain(sock)


@FUZZ
@given(garbage=st.binary(min_size=1, max_size=600))
def test_garbage_after_the_handshake(
    hostile_proxy: ProxyThread, probe: Prober, garbage: bytes
) -> None:
    client = logged_in(hostile_proxy)
    with client.sock:
        client.sock.sendall(garbage)
        client.sock.shutdown(socket.SHUT_WR)
        drain(client.sock)


@FUZZ
@given(
    command=st.sampled_from([0x03, 0x16, 0x17, 0x18, 0x19, 0x1A, 0x1C, 0xFA, 0x11, 0x1F]),
    body=st.binary(max_size=64),
    seq=st.integers(0, 255),
)
def test_malformed_commands(
    hostile_proxy: ProxyThread, probe: Prober, command: int, body: bytes, seq: int
) -> None:
    """Well-framed packets with random commands and bodies: the session answers or closes,
    and if it answers, it still serves a query afterwards."""
    client = logged_in(hostile_proxy)
    with client.sock:
        client.sock.sendall(packet(bytes((command,)) + body, seq))
        try:
            client.sock.sendall(packet(b"\x03SELECT 7"))
        except OSError:
            return  # closed: a framing violation closes this client only
        answered_or_closed(client.sock, b"\x017")


def answered_or_closed(sock: socket.socket, marker: bytes) -> None:
    """Read until ``marker`` (the answer to the last query) arrives or the proxy closes the
    connection; failing to do either within the socket's timeout is a hang."""
    received = bytearray()
    try:
        while marker not in received:
            data = sock.recv(65536)
            if not data:
                return
            received += data
    except ConnectionError:
        return


def test_truncated_packets_and_lying_lengths(hostile_proxy: ProxyThread, probe: Prober) -> None:
    cases = [
        packet(b"\x03SELECT 1")[:7],  # truncated, then the client goes away
        struct.pack("<I", 1000) + b"\x03SELECT",  # announces more than it sends
        struct.pack("<I", 0xFFFFFF) + b"\x03",  # a 16 MiB piece that never comes
        struct.pack("<I", 0xFFFFFF) + b"\x03" + b" " * 1000 + struct.pack("<I", 5 | 7 << 24),
        packet(b"") + packet(b"\x03SELECT 1", 5),  # empty command, wrong sequence id
        struct.pack("<I", 0xFFFFFF | 0 << 24),  # a header only
    ]
    for wire in cases:
        client = logged_in(hostile_proxy)
        with client.sock:
            client.sock.sendall(wire)
            client.sock.shutdown(socket.SHUT_WR)
            drain(client.sock)
    # A packet beyond the proxy's max_allowed_packet: ERR 1153, and this client is closed.
    client = logged_in(hostile_proxy)
    with client.sock:
        limit = hostile_proxy.server.config.max_allowed_packet
        client.sock.sendall(struct.pack("<I", 0xFFFFFF) + b"\x03" + b" " * (0xFFFFFF - 1))
        for seq in range(1, limit // 0xFFFFFF + 2):
            try:
                client.sock.sendall(struct.pack("<I", 0xFFFFFF | seq << 24) + b" " * 0xFFFFFF)
            except OSError:
                break
        answer = drain(client.sock)
        assert b"max_allowed_packet" in answer


# ----------------------------------------------------------------- oversized


def test_oversized_packets(hostile_proxy: ProxyThread, probe: Prober) -> None:
    client = logged_in(hostile_proxy)
    with client.sock:
        # A 40 MiB query in three 16 MiB pieces, streamed to the primary.
        value = b"x" * (40 * MIB)
        wire, _next = frame_packets(b"\x03SELECT LENGTH('" + value + b"')", 0)
        client.sock.sendall(wire)
        client.seq = 3  # the answer follows the client's three packets
        assert client.result()[0].rows == [(str(len(value)).encode(),)]
        # An oversized token is refused without being parsed.
        token = b"mariadb:" + b",".join(b"%d-1-%d" % (d, d) for d in range(100_000))
        client.command(b"\x03SET @@consistent_token = '" + token + b"'")
        with pytest.raises(Exception, match="Malformed GTID set") as info:
            client.result()
        assert info.value.args[0] == 1772
        assert client.query("SELECT 3")[0].rows == [(b"3",)]


# ----------------------------------------------------------------- slow and many


def slow_send(sock: socket.socket, data: bytes, seconds: float) -> None:
    pause = seconds / max(len(data), 1)
    for i in range(len(data)):
        sock.sendall(data[i : i + 1])
        time.sleep(pause)


def test_slowloris(hostile_proxy: ProxyThread, probe: Prober) -> None:
    failures: list[BaseException] = []

    def slow_query() -> None:
        try:
            client = logged_in(hostile_proxy)
            with client.sock:
                client.seq = 1
                slow_send(client.sock, packet(b"\x03SELECT 'slow'"), 2.0)
                assert client.result()[0].rows == [(b"slow",)]
        except BaseException as e:
            failures.append(e)

    def slow_login() -> None:
        with raw_socket(hostile_proxy) as sock:
            slow_send(sock, b"\x55" * 40, 2.0)  # never a valid handshake
            drain(sock)

    threads = [threading.Thread(target=slow_query) for _ in range(10)]
    threads += [threading.Thread(target=slow_login) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures


def test_many_concurrent_clients(hostile_proxy: ProxyThread, probe: Prober) -> None:
    idle = []
    try:
        for _ in range(200):
            sock = raw_socket(hostile_proxy)
            idle.append(sock)
        failures: list[BaseException] = []

        def busy(i: int) -> None:
            try:
                conn = connect(hostile_proxy)
                try:
                    with conn.cursor() as cur:
                        for j in range(20):
                            cur.execute("SELECT %s + %s", (i, j))
                            assert cur.fetchall() == ((i + j,),)
                finally:
                    conn.close()
            except BaseException as e:
                failures.append(e)

        threads = [threading.Thread(target=busy, args=(i,)) for i in range(30)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert not failures, failures
    finally:
        random.shuffle(idle)
        for sock in idle:
            sock.close()
