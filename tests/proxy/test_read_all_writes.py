"""``read_all_writes`` through the proxy, on real MariaDB and on the emulator, under injected
replica lag: a client session that only reads sees every write another client of the same proxy
had had acknowledged, and its reads never go backwards.  Each scenario also runs at
``eventual``, which must show the stale or backward reads the guarantee prevents.

Which server answered is read from the answer itself (``@@port``), never from the proxy."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pymysql
import pytest

from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication
from proxy.config import parse
from proxy.testing import ProxyThread

from .conftest import USERS

#: Write-then-read rounds.
ROUNDS = 400
#: Reads of the monotonic-reads scenario.
READS = 400
#: How long one replica's applier stays stopped before the other's is (``injected_lag``).
LAG_PERIOD = 0.05


@dataclass(frozen=True)
class Proxied(Replication):
    """The topology under test with a proxy in front of it."""

    proxies: list[ProxyThread] = field(default_factory=list)
    clients: list[Any] = field(default_factory=list)

    def start_proxy(self) -> ProxyThread:
        config = parse(
            {
                "listen": "127.0.0.1:0",
                "wait_timeout": 2.0,
                "backends": {
                    "primary": self.primary,
                    "replicas": self.replicas,
                    "user": self.user,
                    "password": self.password,
                    "monitor_interval_ms": 50,
                    "connect_timeout": 2.0,
                },
                "users": USERS,
            }
        )
        proxy = ProxyThread(config).start()
        self.proxies.append(proxy)
        return proxy

    def client(self, proxy: ProxyThread, level: str | None = None) -> Any:
        """A PyMySQL client of ``proxy``, at ``level`` (the proxy's default when ``None``)."""
        conn = pymysql.connect(
            host="127.0.0.1",
            port=proxy.port,
            user="app",
            password="app-secret",
            database=self.database,
            autocommit=True,
            connect_timeout=5,
            read_timeout=30,
        )
        self.clients.append(conn)
        if level is not None:
            with conn.cursor() as cur:
                cur.execute("SET @@consistent_level = %s", (level,))
        return conn

    def release(self) -> None:
        for conn in self.clients:
            with contextlib.suppress(Exception):
                conn.close()
        for proxy in self.proxies:
            proxy.stop()


@pytest.fixture(params=REPLICATION_BACKENDS)
def proxied(request: pytest.FixtureRequest) -> Iterator[Proxied]:
    """The topology under test, a clean database and a ``kv`` table on every replica."""
    for replication in open_replication(request, Proxied):
        replication.primary_query("CREATE TABLE kv (k INT PRIMARY KEY, v INT NOT NULL)")
        replication.primary_query("INSERT INTO kv VALUES (1, 0)")
        replication.catch_up()
        yield replication


def read(conn: Any) -> tuple[int, int]:
    """The counter and the port of the server that answered."""
    with conn.cursor() as cur:
        cur.execute("SELECT v, @@port FROM kv WHERE k = 1")
        [(value, port)] = cur.fetchall()
    return int(value), int(port)


def reads_of_anothers_writes(
    proxied: Proxied, writer: Any, reader: Any, start: int
) -> tuple[int, int]:
    """``ROUNDS`` times: ``writer`` sets a new value and has it acknowledged, then ``reader``
    (another client of the proxy, which never writes) reads it.  Returns (misses, reads served
    by replicas)."""
    replicas = set(proxied.replica_ports)
    misses = on_replicas = 0
    with writer.cursor() as cur:
        for i in range(start, start + ROUNDS):
            cur.execute("UPDATE kv SET v = %s WHERE k = 1", (i,))
            value, port = read(reader)
            misses += value != i
            on_replicas += port in replicas
    return misses, on_replicas


def test_a_client_sees_what_another_client_of_the_proxy_had_acknowledged(
    proxied: Proxied,
) -> None:
    proxy = proxied.start_proxy()
    writer = proxied.client(proxy)
    reader = proxied.client(proxy, "read_all_writes")
    control = proxied.client(proxy, "eventual")
    with proxied.injected_lag(LAG_PERIOD):
        # The control first: the guarded reads teach the proxy which replica lags, and it
        # then spares even eventual reads the lagging one.
        stale, _ = reads_of_anothers_writes(proxied, writer, control, 1)
        misses, on_replicas = reads_of_anothers_writes(proxied, writer, reader, ROUNDS + 1)
    assert misses == 0
    assert on_replicas > ROUNDS // 2  # the guarantee did not come from avoiding replicas
    assert stale > 0  # the same workload at eventual reads stale data: the test can fail


def test_clients_of_two_proxies_do_not_share_what_was_acknowledged(proxied: Proxied) -> None:
    """What the guarantee rests on is the proxy's own record: a client of another proxy (another
    process) gets nothing from it, and reads at read_all_writes there can miss the write."""
    writing, reading = proxied.start_proxy(), proxied.start_proxy()
    writer = proxied.client(writing)
    reader = proxied.client(reading, "read_all_writes")
    with proxied.injected_lag(LAG_PERIOD):
        misses, _ = reads_of_anothers_writes(proxied, writer, reader, 1)
    assert misses > 0
    acknowledged = writing.run(lambda: writing.server.status()["acknowledged"])
    assert acknowledged
    assert reading.run(lambda: reading.server.status()["acknowledged"]) == ""


@dataclass
class Counting:
    """What a reader observed of a counter that another client keeps incrementing."""

    backwards: int = 0  # a read saw less than the session's previous read
    below_acknowledged: int = 0  # a read missed an increment acknowledged before it began
    on_replicas: int = 0
    ports: set[int] = field(default_factory=set)


def count_while_incrementing(proxied: Proxied, writer: Any, reader: Any) -> Counting:
    """A writer thread increments the counter as fast as it can and publishes each value once
    its UPDATE returned; the reader reads ``READS`` times and compares each value with its
    previous read and with the last value published before the read began."""
    acknowledged = -1
    started, stop = threading.Event(), threading.Event()
    failure: list[BaseException] = []

    def increment() -> None:
        nonlocal acknowledged
        try:
            with writer.cursor() as cur:
                cur.execute("SELECT v FROM kv WHERE k = 1 FOR UPDATE")  # on the primary
                [(acknowledged,)] = cur.fetchall()
                started.set()
                while not stop.is_set():
                    cur.execute("UPDATE kv SET v = v + 1 WHERE k = 1")
                    acknowledged += 1  # only this thread writes the counter
        except BaseException as exc:  # reported by the reader's thread
            failure.append(exc)
        finally:
            started.set()

    thread = threading.Thread(target=increment, name="incrementer", daemon=True)
    thread.start()
    started.wait(30)
    replicas = set(proxied.replica_ports)
    seen = Counting()
    previous = -1
    try:
        for _ in range(READS):
            floor = acknowledged
            value, port = read(reader)
            seen.backwards += value < previous
            seen.below_acknowledged += value < floor
            previous = value
            if port in replicas:
                seen.on_replicas += 1
                seen.ports.add(port)
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failure, failure
    return seen


def test_a_clients_reads_never_go_backwards(proxied: Proxied) -> None:
    proxy = proxied.start_proxy()
    writer = proxied.client(proxy)
    reader = proxied.client(proxy, "read_all_writes")
    control = proxied.client(proxy, "eventual")
    with proxied.injected_lag(LAG_PERIOD):
        unguarded = count_while_incrementing(proxied, writer, control)  # first: see above
        guarded = count_while_incrementing(proxied, writer, reader)
    assert (guarded.backwards, guarded.below_acknowledged) == (0, 0)
    assert guarded.on_replicas > READS // 2
    assert unguarded.ports == set(proxied.replica_ports)  # the control read from both
    assert unguarded.backwards > 0  # unguarded, the same reads do go backwards
    assert unguarded.below_acknowledged > 0  # and miss acknowledged increments
