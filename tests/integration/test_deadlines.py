"""Every backend operation has a deadline, and replicas that fall behind or come back are
handled by the background monitor: one scenario suite through every form (the DB-API wrapper,
which the SQLAlchemy engine rides on, its asyncio form, and the proxy), on real MariaDB
replication and, where the emulator can express the fault, on the emulator.

Faults: a black-hole replica (accepts TCP, never answers), a replica or a primary stopped with
SIGSTOP (MariaDB only: the emulator runs in this process), a killed replica, a replica delayed
beyond ``wait_timeout``, a replica killed and restarted.  Where a test states a time bound it is
the one the deadlines promise, with generous slack for this shared machine: a read completes
within ``wait_timeout + replica_read_timeout + connect_timeout`` plus :data:`SLACK`.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

import pymysql
import pytest

import consistent.dbapi as db
from consistent import aio, trace
from consistent.errnos import CR
from consistent.policy import ReplicaKnowledge
from consistent.telemetry import MemoryExporter, Telemetry, TelemetryConfig
from consistent.testing.blackhole import BlackHole
from consistent.testing.replication import REPLICATION_BACKENDS, Replication, open_replication
from proxy.config import parse
from proxy.testing import ProxyThread

#: Seconds added to every stated bound: the machine is shared and slow at times.
SLACK: Final = 2.0
FORMS: Final = ("wrapper", "aio", "proxy")
MARIADB_ONLY: Final = REPLICATION_BACKENDS[:1]
# A monitor interval that means "no monitor to speak of" for the proxy, which always has one:
# it polls once at start, then not again within a test.
_NO_MONITOR_MS: Final = 3_600_000
_PROXY_USER: Final = {"app": {"password": "app-secret"}}


@dataclass(frozen=True)
class Settings:
    """The knobs both forms share, by their meaning."""

    wait_timeout: float = 1.0
    on_timeout: str = "primary"
    # Not tighter: a loaded machine may take a second to open a connection or answer a read.
    replica_read_timeout: float = 2.0
    read_timeout: float = 30.0
    connect_timeout: float = 2.0
    #: Seconds between monitor polls; 0: no monitor (the wrapper) or one poll at start (proxy).
    monitor_interval: float = 0.1

    @property
    def read_bound(self) -> float:
        """What a read may take at most, slack included."""
        return self.wait_timeout + self.replica_read_timeout + self.connect_timeout + SLACK


class Client:
    """One session through one form: statements, rows, and how long each took."""

    def __init__(self, cursor: Callable[[], Any], close: Callable[[], None]) -> None:
        self._cursor = cursor
        self._close = close
        #: Seconds the last statement took.
        self.elapsed = 0.0

    def rows(self, sql: str, args: Any = None) -> list[tuple[Any, ...]]:
        started = time.monotonic()
        try:
            with contextlib.closing(self._cursor()) as cur:
                cur.execute(sql, args)
                if cur.description is None:
                    return []  # no result set (a deferred BEGIN has none to fetch)
                return [tuple(row) for row in cur.fetchall()]
        finally:
            self.elapsed = time.monotonic() - started

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._close()


class _BlockingCursor:
    """An asyncio cursor driven to completion call by call on ``loop`` (what :class:`Client`
    needs of a cursor)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, cursor: aio.Cursor) -> None:
        self._loop = loop
        self._cursor = cursor

    @property
    def description(self) -> Any:
        return self._cursor.description

    def execute(self, sql: str, args: Any = None) -> int:
        return self._loop.run_until_complete(self._cursor.execute(sql, args))

    def fetchall(self) -> Any:
        return self._loop.run_until_complete(self._cursor.fetchall())

    def close(self) -> None:
        self._loop.run_until_complete(self._cursor.close())


@dataclass
class Harness:
    """A form in front of a topology, with the knowledge and the spans it produces."""

    form: str
    replication: Replication
    knowledge: ReplicaKnowledge = field(default_factory=ReplicaKnowledge)
    memory: MemoryExporter = field(default_factory=MemoryExporter)
    table: str = field(default_factory=lambda: f"kv_{secrets.token_hex(3)}")
    _closers: list[Callable[[], None]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.telemetry = Telemetry(TelemetryConfig(), exporters=[self.memory])
        self.replication.primary_query(
            f"CREATE TABLE {self.table} (k INT PRIMARY KEY, v INT NOT NULL)"
        )
        self.replication.catch_up()

    @property
    def replicas(self) -> list[str]:
        return self.replication.replicas

    @property
    def primary_port(self) -> int:
        return self.replication.primary_port

    def open(self, replicas: list[str], settings: Settings) -> Client:
        if self.form == "wrapper":
            client = self._wrapper(replicas, settings)
        elif self.form == "aio":
            client = self._aio(replicas, settings)
        else:
            client = self._proxy(replicas, settings)
        self._closers.append(client.close)
        return client

    def _options(self, replicas: list[str], s: Settings) -> dict[str, Any]:
        rep = self.replication
        return dict(
            primary=rep.primary,
            replicas=replicas,
            **rep.options,
            wait_timeout=s.wait_timeout,
            on_timeout=s.on_timeout,
            replica_read_timeout=s.replica_read_timeout,
            read_timeout=s.read_timeout,
            replica_connect_timeout=s.connect_timeout,
            monitor_interval=s.monitor_interval,
            knowledge=self.knowledge,
            telemetry=self.telemetry,
        )

    def _wrapper(self, replicas: list[str], s: Settings) -> Client:
        conn = db.connect(**self._options(replicas, s))
        return Client(conn.cursor, conn.close)

    def _aio(self, replicas: list[str], s: Settings) -> Client:
        """The asyncio form, each call run to completion on a loop of the client's own."""
        loop = asyncio.new_event_loop()
        try:
            conn = loop.run_until_complete(aio.connect(**self._options(replicas, s)))
        except BaseException:
            loop.close()
            raise

        def close() -> None:
            try:
                loop.run_until_complete(conn.ensure_closed())
            finally:
                loop.close()

        return Client(lambda: _BlockingCursor(loop, conn.cursor()), close)

    def _proxy(self, replicas: list[str], s: Settings) -> Client:
        rep = self.replication
        interval_ms = s.monitor_interval * 1000 if s.monitor_interval else _NO_MONITOR_MS
        config = parse(
            {
                "listen": "127.0.0.1:0",
                "wait_timeout": s.wait_timeout,
                "on_timeout": s.on_timeout,
                "backends": {
                    "primary": rep.primary,
                    "replicas": replicas,
                    "user": rep.user,
                    "password": rep.password,
                    "connect_timeout": s.connect_timeout,
                    "replica_read_timeout": s.replica_read_timeout,
                    "read_timeout": s.read_timeout,
                    "monitor_interval_ms": interval_ms,
                },
                "users": _PROXY_USER,
            }
        )
        proxy = ProxyThread(config, knowledge=self.knowledge, telemetry=self.telemetry).start()
        try:
            conn = pymysql.connect(
                host="127.0.0.1",
                port=proxy.port,
                user="app",
                password="app-secret",
                database=rep.database,
                autocommit=True,
                connect_timeout=10,
                read_timeout=120,
            )
        except BaseException:
            proxy.stop()
            raise

        def close() -> None:
            with contextlib.suppress(Exception):
                conn.close()
            proxy.stop()

        return Client(conn.cursor, close)

    # ----------------------------------------------------------------- observations

    def spans(self) -> list[dict[str, Any]]:
        """The attributes of every statement span so far."""
        assert self.telemetry.flush(10)
        return [
            dict(r.attributes)
            for r in self.memory.records
            if r.attributes.get(trace.RECORD_KIND) == "statement"
        ]

    def involving(self, name: str) -> list[dict[str, Any]]:
        """Spans of statements that waited on, ran on, or gave up on replica ``name``."""
        found = []
        for span in self.spans():
            tried = str(span.get(trace.ROUTE_TRIED, "")).split(",")
            if name in (span.get(trace.ROUTE_TARGET), span.get(trace.WAIT_TARGET)) or (
                name in tried
            ):
                found.append(span)
        return found

    def waits_on(self, name: str) -> int:
        """How many statements waited on replica ``name``."""
        return sum(
            1
            for span in self.spans()
            if span.get(trace.WAIT_TARGET) == name and int(span.get(trace.WAIT_COUNT, 0)) > 0
        )

    def until(self, what: str, test: Callable[[], bool], timeout: float) -> float:
        """Poll ``test`` until true; the seconds it took (fails after ``timeout``)."""
        started = time.monotonic()
        while not test():
            if time.monotonic() - started > timeout:
                pytest.fail(f"{what}: not within {timeout:g} s")
            time.sleep(0.02)
        return time.monotonic() - started

    def close(self) -> None:
        for close in reversed(self._closers):
            close()
        self.telemetry.shutdown()


@pytest.fixture(params=REPLICATION_BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Replication]:
    yield from open_replication(request, Replication)


@pytest.fixture(params=FORMS)
def harness(request: pytest.FixtureRequest, backend: Replication) -> Iterator[Harness]:
    made = Harness(request.param, backend)
    try:
        yield made
    finally:
        made.close()


def port_of(name: str) -> int:
    return int(name.rpartition(":")[2])


def is_lost(exc: BaseException) -> bool:
    """Error 2013, as both forms report a server that went silent."""
    return bool(exc.args) and exc.args[0] == CR.SERVER_LOST


# --- a replica that accepts TCP and never answers ------------------------------------------------


def test_a_black_hole_replica_costs_a_read_one_connect_timeout_at_most(
    harness: Harness, black_hole: BlackHole
) -> None:
    settings = Settings(monitor_interval=0)
    client = harness.open([black_hole.name], settings)
    # Nothing required yet: the read itself is sent to the black hole, then elsewhere.
    assert client.rows("SELECT 1, @@port") == [(1, harness.primary_port)]
    assert client.elapsed < settings.read_bound
    for k in range(1, 4):
        # A read that must wait first: the wait is what meets the black hole (or its cool-down).
        client.rows(f"INSERT INTO {harness.table} VALUES (%s, %s)", (k, k * 10))
        assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = %s", (k,)) == [
            (k * 10, harness.primary_port)
        ]
        assert client.elapsed < settings.read_bound
    assert black_hole.accepted >= 1
    assert not harness.knowledge.healthy(black_hole.name)


def test_the_monitor_finds_a_black_hole_before_any_read_does(
    harness: Harness, black_hole: BlackHole
) -> None:
    settings = Settings(monitor_interval=0.1)
    live = harness.replicas[0]
    client = harness.open([black_hole.name, live], settings)
    harness.until(
        "the monitor marks the black hole unhealthy",
        lambda: not harness.knowledge.healthy(black_hole.name),
        timeout=settings.connect_timeout * 4 + 10,
    )
    harness.memory.clear()
    for k in range(1, 11):
        client.rows(f"INSERT INTO {harness.table} VALUES (%s, %s)", (k, k))
        assert client.rows(f"SELECT v FROM {harness.table} WHERE k = %s", (k,)) == [(k,)]
    assert client.rows("SELECT @@port")[0][0] == port_of(live)
    assert harness.involving(black_hole.name) == []


def test_a_wait_may_outlast_the_replica_read_deadline(harness: Harness) -> None:
    """The wait statement is silent for up to ``wait_timeout`` by design: its own deadline is
    ``wait_timeout`` plus a margin, so a replica that is merely behind is not taken for dead."""
    rep = harness.replication
    settings = Settings(wait_timeout=2.0, replica_read_timeout=0.5, monitor_interval=0)
    replica = harness.replicas[0]
    client = harness.open([replica], settings)
    rep.pause(0)
    try:
        client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
        harness.memory.clear()
        assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 1") == [
            (10, harness.primary_port)
        ]
    finally:
        rep.resume(0)
    (span,) = [s for s in harness.spans() if s.get(trace.STATEMENT_KIND) == "read"]
    assert (span[trace.WAIT_TARGET], span[trace.WAIT_OUTCOME]) == (replica, "timeout")
    assert (span[trace.ROUTE_REASON], span.get(trace.ROUTE_DETAIL)) == ("timeout_fallback", None)
    assert span[trace.WAIT_DURATION_MS] >= settings.wait_timeout * 1000 * 0.9
    assert harness.knowledge.healthy(replica)


# --- a replica stopped with SIGSTOP ------------------------------------------------------------


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_a_read_sent_to_a_frozen_replica_goes_elsewhere_within_the_bound(
    harness: Harness,
) -> None:
    rep = harness.replication
    assert rep.freeze is not None
    assert rep.thaw is not None
    settings = Settings(monitor_interval=0)
    replica = harness.replicas[0]
    client = harness.open([replica], settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
    rep.catch_up()
    assert client.rows("SELECT @@port") == [(port_of(replica),)]  # its connection is open
    rep.freeze(0)
    try:
        assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 1") == [
            (10, harness.primary_port)
        ]
        assert client.elapsed < settings.read_bound
        assert not harness.knowledge.healthy(replica)
        # While it cools down nothing is sent to it.
        assert client.rows("SELECT @@port") == [(harness.primary_port,)]
        assert client.elapsed < settings.read_bound
    finally:
        rep.thaw(0)


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_a_read_in_a_transaction_on_a_frozen_replica_fails_with_2013(harness: Harness) -> None:
    rep = harness.replication
    assert rep.freeze is not None
    assert rep.thaw is not None
    settings = Settings(monitor_interval=0)
    replica = harness.replicas[0]
    client = harness.open([replica], settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
    rep.catch_up()
    client.rows("START TRANSACTION READ ONLY")
    assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 1") == [
        (10, port_of(replica))
    ]
    rep.freeze(0)
    try:
        with pytest.raises(pymysql.err.OperationalError) as info:
            client.rows(f"SELECT v FROM {harness.table} WHERE k = 1")
        assert is_lost(info.value), info.value
        assert client.elapsed < settings.read_bound
    finally:
        rep.thaw(0)
    # The transaction ended with its connection; the session goes on.
    client.rows("COMMIT")
    assert client.rows(f"SELECT v FROM {harness.table} WHERE k = 1") == [(10,)]


# --- a primary stopped with SIGSTOP ------------------------------------------------------------


def _count(rep: Replication, table: str, k: int) -> int:
    return int(rep.primary_query(f"SELECT COUNT(*) FROM {table} WHERE k = %s", (k,))[0][0])


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_a_write_to_a_frozen_primary_fails_with_2013_and_is_never_repeated(
    harness: Harness,
) -> None:
    rep = harness.replication
    assert rep.freeze is not None
    assert rep.thaw is not None
    settings = Settings(read_timeout=2.0)
    client = harness.open(harness.replicas, settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
    # A duplicate key would show a second attempt: the table has no other way to say it.
    rep.primary_query(f"ALTER TABLE {harness.table} ADD COLUMN n INT NOT NULL DEFAULT 0")
    rep.freeze(None)
    try:
        with pytest.raises(pymysql.err.OperationalError) as info:
            client.rows(f"UPDATE {harness.table} SET n = n + 1 WHERE k = 1")
        assert is_lost(info.value), info.value
        assert client.elapsed < settings.read_timeout + SLACK
    finally:
        rep.thaw(None)
    # The server may still run the update it had received; never twice.
    time.sleep(0.5)
    assert rep.primary_query(f"SELECT n FROM {harness.table} WHERE k = 1")[0][0] in (0, 1)
    # The session is over (it is never silently reconnected); a new one works.
    with pytest.raises(pymysql.err.MySQLError):
        client.rows("SELECT 1")
    fresh = harness.open(harness.replicas, settings)
    assert fresh.rows(f"SELECT v FROM {harness.table} WHERE k = 1") == [(10,)]


@pytest.mark.parametrize("backend", MARIADB_ONLY, indirect=True)
def test_a_transaction_on_a_frozen_primary_commits_nothing(harness: Harness) -> None:
    rep = harness.replication
    assert rep.freeze is not None
    assert rep.thaw is not None
    settings = Settings(read_timeout=2.0)
    client = harness.open(harness.replicas, settings)
    client.rows("BEGIN")
    client.rows(f"INSERT INTO {harness.table} VALUES (3, 30)")
    rep.freeze(None)
    try:
        with pytest.raises(pymysql.err.OperationalError) as info:
            client.rows(f"INSERT INTO {harness.table} VALUES (4, 40)")
        assert is_lost(info.value), info.value
        assert client.elapsed < settings.read_timeout + SLACK
    finally:
        rep.thaw(None)
    time.sleep(0.5)  # time for the thawed server to see the statement and the closed socket
    assert _count(rep, harness.table, 3) == 0
    assert _count(rep, harness.table, 4) == 0


# --- a killed replica --------------------------------------------------------------------------


def test_a_read_on_a_killed_replica_goes_elsewhere(harness: Harness) -> None:
    settings = Settings(monitor_interval=0)
    replica = harness.replicas[0]
    client = harness.open([replica], settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
    harness.replication.catch_up()
    assert client.rows("SELECT @@port") == [(port_of(replica),)]
    harness.replication.kill(0)
    assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 1") == [
        (10, harness.primary_port)
    ]
    assert client.elapsed < settings.read_bound
    assert not harness.knowledge.healthy(replica)


# --- a replica delayed beyond wait_timeout -----------------------------------------------------


def test_a_replica_delayed_beyond_wait_timeout_costs_no_wait(harness: Harness) -> None:
    rep = harness.replication
    assert rep.delay is not None
    settings = Settings(wait_timeout=0.5, monitor_interval=0.1)
    replica = harness.replicas[0]
    rep.delay(0, 3)
    client = harness.open([replica], settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (0, 0)")

    def lagging() -> bool:
        lag = harness.knowledge.view(replica).lag
        return lag is not None and lag >= settings.wait_timeout

    harness.until("the monitor sees the replica lag", lagging, timeout=15)
    harness.memory.clear()
    for k in range(1, 21):
        client.rows(f"INSERT INTO {harness.table} VALUES (%s, %s)", (k, k))
        assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = %s", (k,)) == [
            (k, harness.primary_port)
        ]
    assert harness.waits_on(replica) == 0
    reads = [s for s in harness.spans() if s.get(trace.STATEMENT_KIND) == "read"]
    assert len(reads) == 20
    assert {(s[trace.ROUTE_REASON], s.get(trace.ROUTE_DETAIL)) for s in reads} == {
        ("timeout_fallback", "lag")
    }


# --- a replica killed, then restarted -----------------------------------------------------------


def test_a_restarted_replica_serves_reads_again_within_a_few_monitor_intervals(
    harness: Harness,
) -> None:
    rep = harness.replication
    settings = Settings(monitor_interval=0.1)
    replica = harness.replicas[0]
    client = harness.open([replica], settings)
    client.rows(f"INSERT INTO {harness.table} VALUES (1, 10)")
    rep.catch_up()
    assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 1") == [
        (10, port_of(replica))
    ]
    rep.kill(0)
    harness.until(
        "the monitor marks the dead replica",
        lambda: not harness.knowledge.healthy(replica),
        timeout=10,
    )
    client.rows(f"INSERT INTO {harness.table} VALUES (2, 20)")  # missed by the dead replica
    assert client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 2") == [
        (20, harness.primary_port)
    ]
    rep.restart(0)
    rep.catch_up()

    def served_by_the_replica() -> bool:
        rows = client.rows(f"SELECT v, @@port FROM {harness.table} WHERE k = 2")
        assert rows[0][0] == 20
        return bool(rows[0][1] == port_of(replica))

    # Generous: about one interval once it answers and has caught up.
    harness.until("a read on the restarted replica", served_by_the_replica, timeout=10.0)
