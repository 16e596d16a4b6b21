"""The MySQL flavour through the DB-API, on emulated servers (no MySQL here).

Until the emulator replicates by itself, the test replicates by hand: a write is applied on
the emulated replica with ``SET GTID_NEXT`` set to the GTID the primary reported, when the test
decides — which is exactly controllable lag.  What is exercised is the MySQL side of the
wrapper: ``OWN_GTID``/``ALL_GTIDS`` tracking (GTIDS blocks in OK packets),
``WAIT_FOR_EXECUTED_GTID_SET`` on the replica, and ALL_GTIDS on replica connections feeding
the replica knowledge.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

import consistent.dbapi as db
from consistent.emulator.wire.thread import EmulatorThread
from consistent.gtid import GtidSet
from consistent.policy import PRIMARY, AcknowledgedWrites, Reason, ReplicaKnowledge


class Pair:
    """An emulated primary and one emulated replica that the test replicates by hand."""

    def __init__(self, primary: EmulatorThread, replica: EmulatorThread) -> None:
        self.primary = primary
        self.replica = replica
        self._admin = pymysql.connect(
            host="127.0.0.1", port=replica.port, user="root", autocommit=True
        )
        with self._admin.cursor() as cur:
            # A replica, though replicated by hand: role discovery must not take it for a
            # second primary.
            cur.execute("SET GLOBAL read_only = 1")

    @property
    def replica_name(self) -> str:
        return f"127.0.0.1:{self.replica.port}"

    def connect(self, **kwargs: Any) -> db.Connection:
        kwargs.setdefault("knowledge", ReplicaKnowledge())
        kwargs.setdefault("acknowledged", AcknowledgedWrites())  # servers new to this test
        return db.connect(
            primary=f"127.0.0.1:{self.primary.port}",
            replicas=[self.replica_name],
            user="root",
            **kwargs,
        )

    def apply(self, gtids: GtidSet, sql: str) -> None:
        """Apply ``sql`` on the replica as the transaction ``gtids`` (one GTID)."""
        [(uuid, _tag, start, end)] = list(gtids.intervals())
        assert start == end, gtids
        with self._admin.cursor() as cur:
            cur.execute(f"SET GTID_NEXT = '{uuid}:{start}'")
            cur.execute(sql)
            cur.execute("SET GTID_NEXT = 'AUTOMATIC'")

    def close(self) -> None:
        self._admin.close()


def run(conn: db.Connection, sql: str) -> GtidSet:
    """Run a write through the wrapper; the GTID it produced (from the token's growth)."""
    before = _token_set(conn)
    conn.cursor().execute(sql)
    return _token_set(conn) - before


def _token_set(conn: db.Connection) -> GtidSet:
    token = conn.token
    return GtidSet.parse(token.partition(":")[2]) if token else GtidSet()


@pytest.fixture
def pair() -> Iterator[Pair]:
    with EmulatorThread() as primary, EmulatorThread() as replica:
        pair = Pair(primary, replica)
        try:
            yield pair
        finally:
            pair.close()


@contextlib.contextmanager
def schema(pair: Pair, conn: db.Connection) -> Iterator[None]:
    for sql in ("CREATE DATABASE app", "CREATE TABLE app.t (k INT PRIMARY KEY, v INT)"):
        pair.apply(run(conn, sql), sql)
    yield


def test_own_gtids_make_a_mysql_token(pair: Pair) -> None:
    conn = pair.connect()
    assert conn.flavor == "mysql"
    produced = run(conn, "CREATE DATABASE app")
    assert len(produced) == 1
    assert conn.token.startswith("mysql:")
    assert GtidSet.parse(conn.token[len("mysql:") :]) == produced


def test_read_your_writes_waits_with_wait_for_executed_gtid_set(pair: Pair) -> None:
    conn = pair.connect(wait_timeout=0.3)
    with schema(pair, conn):
        cur = conn.cursor()
        insert = "INSERT INTO app.t VALUES (1, 10)"
        gtid = run(conn, insert)
        cur.execute("SELECT v FROM app.t WHERE k = 1")  # the replica lacks it: timeout
        assert cur.fetchall() == ((10,),)
        decision = conn.last_decision
        assert decision is not None
        assert (decision.target, decision.reason) == (PRIMARY, Reason.TIMEOUT_FALLBACK)
        assert decision.tried == (pair.replica_name,)

        update = "UPDATE app.t SET v = 11 WHERE k = 1"
        later = run(conn, update)
        conn.policy.config = dataclasses.replace(conn.policy.config, wait_timeout=5.0)

        def replicate_both() -> None:
            pair.apply(gtid, insert)
            pair.apply(later, update)

        timer = threading.Timer(0.2, replicate_both)
        timer.start()
        try:
            cur.execute("SELECT v FROM app.t WHERE k = 1")
            assert cur.fetchall() == ((11,),)  # read on the replica, after the wait
        finally:
            timer.join()
        decision = conn.last_decision
        assert decision is not None
        assert (decision.target, decision.reason) == (pair.replica_name, Reason.WAITED)
        assert decision.wait_set is not None
        assert decision.wait_set >= later


def test_read_all_writes_requires_what_others_committed_before(pair: Pair) -> None:
    conn = pair.connect(level="read_all_writes", wait_timeout=0.3)
    with schema(pair, conn):
        other = pymysql.connect(
            host="127.0.0.1", port=pair.primary.port, user="root", autocommit=True
        )
        with contextlib.closing(other), other.cursor() as cur:
            cur.execute("INSERT INTO app.t VALUES (1, 1)")  # T1, not through the wrapper
        run(conn, "INSERT INTO app.t VALUES (2, 2)")  # T2: its OK carries ALL_GTIDS
        required = _token_set(conn)
        executed = GtidSet.parse(_scalar(pair.primary.port, "SELECT @@GLOBAL.gtid_executed"))
        assert required == executed  # T1 is in the session's set
        cur = conn.cursor()
        cur.execute("SELECT COUNT(*) FROM app.t")
        assert cur.fetchall() == ((2,),)
        assert conn.last_decision is not None
        assert conn.last_decision.reason is Reason.TIMEOUT_FALLBACK  # the replica lacks T1


def test_replica_connections_teach_the_knowledge_with_all_gtids(pair: Pair) -> None:
    conn = pair.connect()
    with schema(pair, conn):
        cur = conn.cursor()
        cur.execute("SET NAMES utf8mb4")  # replayed on the replica connection: an OK there
        cur.execute("SELECT 1")
        assert conn.last_decision is not None
        assert conn.last_decision.target == pair.replica_name
        known = conn.policy.knowledge.view(pair.replica_name).executed
        assert known is not None
        assert known == GtidSet.parse(_scalar(pair.replica.port, "SELECT @@GLOBAL.gtid_executed"))


def _scalar(port: int, sql: str) -> str:
    conn = pymysql.connect(host="127.0.0.1", port=port, user="root")
    with contextlib.closing(conn), conn.cursor() as cur:
        cur.execute(sql)
        return str(cur.fetchone()[0])
