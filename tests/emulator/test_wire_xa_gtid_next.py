"""XA transactions and the GTID_NEXT rules, over the wire with PyMySQL.

* ``binlog_xa_trx_gtid_response_packet.result``: XA PREPARE and XA COMMIT each get a GTID;
  ALL_GTIDS reports the executed set after each, OWN_GTID the step's GTID;
* ``xa.cc``: the XA state machine and its errors (1397, 1398, 1399, 1400, 1440), XA RECOVER,
  a prepared transaction surviving its session's disconnect, ONE PHASE with one GTID, XA
  ROLLBACK of an IDLE transaction logging nothing;
* ``binlog_gtid_errors.result``: 1778 for an implicit commit inside a transaction while
  GTID_NEXT is ``'UUID:NUMBER'`` (nothing committed, the DDL not logged), 1790 while owning a
  GTID or ANONYMOUS, a refused SET releasing ownership, 1837 after COMMIT or ROLLBACK, a
  transaction whose GTID was executed before skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from consistent.dbapi._pymysql import TrackingConnection
from consistent.emulator.config import GtidMode, ServerConfig
from consistent.emulator.wire import EmulatorThread
from consistent.protocol import Gtids, Reader, TransactionState, parse_session_state

U = "00000000-1111-0000-1111-000000000000"
A = "aaaaaaaa-aaaa-aaaa-aaaa-aaaaaaaaaaaa"

RMFAIL = "XAER_RMFAIL: The command cannot be executed when global transaction is in the  %s state"
IMPLICIT_COMMIT = (
    1778,
    "Cannot execute statements with implicit commit inside a transaction when "
    "@@SESSION.GTID_NEXT == 'UUID:NUMBER'.",
)


def owns(what: str) -> tuple[int, str]:
    return (
        1790,
        "@@SESSION.GTID_NEXT cannot be changed by a client that owns a GTID. The client owns "
        f"{what}. Ownership is released on COMMIT or ROLLBACK.",
    )


@pytest.fixture
def emu() -> Iterator[EmulatorThread]:
    with EmulatorThread(ServerConfig(server_uuid=U)) as emulator:
        yield emulator


def connect(emu: EmulatorThread, **kw: Any) -> pymysql.connections.Connection:
    kw.setdefault("autocommit", True)
    return pymysql.connect(host="127.0.0.1", port=emu.port, user="root", connect_timeout=10, **kw)


def run(conn: pymysql.connections.Connection, sql: str) -> tuple[tuple[Any, ...], ...]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return tuple(cur.fetchall())


def error(conn: pymysql.connections.Connection, sql: str) -> tuple[Any, ...]:
    with pytest.raises(pymysql.err.MySQLError) as info:
        run(conn, sql)
    return tuple(info.value.args)


def executed(conn: pymysql.connections.Connection) -> str:
    return str(run(conn, "SELECT @@GLOBAL.gtid_executed")[0][0])


class Reports:
    """The GTIDS and TRANSACTION_STATE blocks of each OK packet."""

    def __init__(self) -> None:
        self.gtids: list[str] = []
        self.states: list[str] = []

    def __call__(self, status: int, tail: bytes) -> None:
        reader = Reader(tail)
        reader.lenenc_bytes()
        if reader.at_end():
            return
        for block in parse_session_state(reader.lenenc_view()):
            if isinstance(block, Gtids):
                self.gtids.append(block.text)
            elif isinstance(block, TransactionState):
                self.states.append(block.flags)

    def take(self) -> tuple[list[str], list[str]]:
        out = (self.gtids, self.states)
        self.gtids, self.states = [], []
        return out


# --- XA -------------------------------------------------------------------------------------------


def test_xa_response_packets_as_in_mysql_test(emu: EmulatorThread) -> None:
    """binlog_xa_trx_gtid_response_packet.result, statement by statement."""
    reports = Reports()
    conn = TrackingConnection(
        host="127.0.0.1",
        port=emu.port,
        user="root",
        autocommit=True,
        observer=reports,
        client_flag=CLIENT.SESSION_TRACK,
    )
    run(conn, "CREATE DATABASE test")  # U:1
    run(conn, "CREATE TABLE test.t1 (c1 INT)")  # U:2
    run(conn, "SET SESSION session_track_transaction_info = 'STATE'")
    run(conn, "SET SESSION session_track_gtids = 'all_gtids'")
    reports.take()
    expected = [
        ("XA START '1-trx'", [], ["T_______"]),
        ("INSERT INTO test.t1 VALUES (1)", [], ["T___W___"]),
        ("XA END '1-trx'", [], []),
        ("XA PREPARE '1-trx'", [f"{U}:1-3"], []),
        ("XA COMMIT '1-trx'", [f"{U}:1-4"], ["________"]),
    ]
    for sql, gtids, states in expected:
        run(conn, sql)
        assert reports.take() == (gtids, states), sql
    run(conn, "SET SESSION session_track_gtids = 'own_gtid'")
    reports.take()
    for sql, gtids in [
        ("XA START '2-trx'", []),
        ("INSERT INTO test.t1 VALUES (1)", []),
        ("XA END '2-trx'", []),
        ("XA PREPARE '2-trx'", [f"{U}:5"]),
        ("XA COMMIT '2-trx'", [f"{U}:6"]),
    ]:
        run(conn, sql)
        assert reports.take()[0] == gtids, sql
    assert run(conn, "SELECT COUNT(*) FROM test.t1") == ((2,),)
    assert executed(conn) == f"{U}:1-6"
    conn.close()
    binlog = emu.server.binlog
    assert binlog is not None
    logged = [[s.sql for s in t.statements] for t in binlog.transactions()][2:4]
    assert logged == [
        [
            "XA START X'312d747278',X'',1",
            "INSERT INTO test.t1 VALUES (1)",
            "XA END X'312d747278',X'',1",
            "XA PREPARE X'312d747278',X'',1",
        ],
        ["XA COMMIT X'312d747278',X'',1"],
    ]


def test_prepared_xa_survives_disconnect_and_is_recovered(emu: EmulatorThread) -> None:
    first = connect(emu)
    run(first, "CREATE DATABASE d")
    run(first, "CREATE TABLE d.t (a INT)")
    run(first, "XA START 'g1', 'b1', 7")
    run(first, "INSERT INTO d.t VALUES (1)")
    run(first, "XA END 'g1', 'b1', 7")
    run(first, "XA PREPARE 'g1', 'b1', 7")
    assert executed(first) == f"{U}:1-3"  # the prepare's GTID is executed
    first.close()
    other = connect(emu)
    assert run(other, "XA RECOVER") == ((7, 2, 2, "g1b1"),)
    assert run(other, "XA RECOVER CONVERT XID") == ((7, 2, 2, "0x67316231"),)
    assert run(other, "SELECT COUNT(*) FROM d.t") == ((0,),)  # not committed yet
    assert error(other, "XA COMMIT 'g1'") == (1397, "XAER_NOTA: Unknown XID")
    run(other, "XA COMMIT 'g1', 'b1', 7")
    assert run(other, "SELECT COUNT(*) FROM d.t") == ((1,),)
    assert run(other, "XA RECOVER") == ()
    assert executed(other) == f"{U}:1-4"
    other.close()


def test_xa_one_phase_one_gtid_and_rollbacks(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "CREATE TABLE d.t (a INT)")
    run(conn, "XA START 'one'")
    run(conn, "INSERT INTO d.t VALUES (1)")
    run(conn, "XA END 'one'")
    run(conn, "XA COMMIT 'one' ONE PHASE")
    assert executed(conn) == f"{U}:1-3"
    # XA ROLLBACK of an IDLE transaction: nothing logged, no GTID.
    run(conn, "XA START 'idle'")
    run(conn, "INSERT INTO d.t VALUES (2)")
    run(conn, "XA END 'idle'")
    run(conn, "XA ROLLBACK 'idle'")
    assert executed(conn) == f"{U}:1-3"
    # XA ROLLBACK of a prepared transaction: logged with a GTID of its own.
    run(conn, "XA START 'prep'")
    run(conn, "INSERT INTO d.t VALUES (3)")
    run(conn, "XA END 'prep'")
    run(conn, "XA PREPARE 'prep'")
    run(conn, "XA ROLLBACK 'prep'")
    assert executed(conn) == f"{U}:1-5"
    assert run(conn, "SELECT a FROM d.t") == ((1,),)
    conn.close()


def test_an_xa_transaction_whose_gtid_was_executed_is_skipped(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")  # U:1
    run(conn, "CREATE TABLE d.t (a INT)")  # U:2
    run(conn, f"SET GTID_NEXT = '{U}:2'")
    for sql in ("XA START 's'", "INSERT INTO d.t VALUES (1)", "XA END 's'", "XA PREPARE 's'"):
        run(conn, sql)
    run(conn, "SET GTID_NEXT = 'AUTOMATIC'")  # the skipped transaction ended at XA PREPARE
    assert run(conn, "XA RECOVER") == ()
    assert run(conn, "SELECT COUNT(*) FROM d.t") == ((0,),)
    assert executed(conn) == f"{U}:1-2"
    conn.close()


def test_xa_state_errors(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "CREATE TABLE d.t (a INT)")
    assert error(conn, "XA END 'x'") == (1399, RMFAIL % "NON-EXISTING")
    assert error(conn, "XA PREPARE 'x'") == (1399, RMFAIL % "NON-EXISTING")
    assert error(conn, "XA START 'x' JOIN") == (
        1398,
        "XAER_INVAL: Invalid arguments (or unsupported command)",
    )
    run(conn, "BEGIN")
    assert error(conn, "XA START 'x'") == (
        1400,
        "XAER_OUTSIDE: Some work is done outside global transaction",
    )
    # A second phase needs the session outside any transaction (1399 before 1397).
    assert error(conn, "XA COMMIT 'nope'") == (1399, RMFAIL % "NON-EXISTING")
    run(conn, "ROLLBACK")
    assert error(conn, "XA COMMIT 'nope'") == (1397, "XAER_NOTA: Unknown XID")
    assert error(conn, "XA ROLLBACK 'nope'") == (1397, "XAER_NOTA: Unknown XID")
    run(conn, "XA START 'x'")
    for sql in ("COMMIT", "ROLLBACK", "BEGIN", "CREATE TABLE d.u (a INT)", "XA START 'y'"):
        assert error(conn, sql) == (1399, RMFAIL % "ACTIVE"), sql
    assert error(conn, "XA PREPARE 'x'") == (1399, RMFAIL % "ACTIVE")
    assert error(conn, "XA END 'y'") == (1397, "XAER_NOTA: Unknown XID")
    run(conn, "XA END 'x'")
    assert error(conn, "SELECT * FROM d.t") == (1399, RMFAIL % "IDLE")
    assert error(conn, "INSERT INTO d.t VALUES (1)") == (1399, RMFAIL % "IDLE")
    assert error(conn, "XA COMMIT 'x'") == (1399, RMFAIL % "IDLE")
    run(conn, "XA PREPARE 'x'")
    other = connect(emu)
    assert error(other, "XA START 'x'") == (1440, "XAER_DUPID: The XID already exists")
    run(other, "XA ROLLBACK 'x'")
    other.close()
    conn.close()


def test_xa_replicates_prepare_and_commit() -> None:
    """A replica applies the XA PREPARE transaction and later its XA COMMIT, each with the
    source's GTID; the rows appear at the XA COMMIT."""
    from consistent.emulator.replication import TopologySpec
    from consistent.emulator.replication.testing import execute, run_virtual, virtual_topology

    async def scenario(clock: Any) -> None:
        async with await virtual_topology(TopologySpec.primary_with_replicas(1), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(
                primary,
                "CREATE DATABASE d; CREATE TABLE d.t (a INT); XA START 'r'; "
                "INSERT INTO d.t VALUES (5); XA END 'r'; XA PREPARE 'r'",
            )
            await clock.sleep(2)
            assert replica.gtid_state.executed == primary.gtid_state.executed
            assert list(replica.xa.prepared) == list(primary.xa.prepared)
            await execute(primary, "XA COMMIT 'r'")
            await clock.sleep(2)
            assert replica.gtid_state.executed == primary.gtid_state.executed
            assert not replica.xa.prepared
            session = replica.open_session()
            out = await session.query_all("SELECT a FROM d.t")
            assert out[0].result is not None
            assert out[0].result.rows == ((5,),)
            await session.close()

    run_virtual(scenario)


# --- GTID_NEXT ---------------------------------------------------------------------------------


def test_implicit_commit_with_assigned_gtid_next_is_1778(emu: EmulatorThread) -> None:
    """binlog_gtid_errors.result: BEGIN; (INSERT;) CREATE TABLE fails, nothing is committed,
    and the GTID stays owned until COMMIT."""
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "CREATE TABLE d.t1 (a INT)")
    before = executed(conn)
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:14'")
    run(conn, "BEGIN")
    assert error(conn, "CREATE TABLE d.t2 (a INT)") == IMPLICIT_COMMIT
    assert error(conn, "BEGIN") == IMPLICIT_COMMIT
    run(conn, "ROLLBACK")
    assert executed(conn) == before
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:15'")
    run(conn, "BEGIN")
    run(conn, "INSERT INTO d.t1 VALUES (1)")
    assert error(conn, "CREATE TABLE d.t2 (a INT)") == IMPLICIT_COMMIT
    assert run(conn, "SELECT @@SESSION.GTID_OWNED") == ((f"{A}:15",),)
    run(conn, "COMMIT")
    assert executed(conn) == f"{U}:1-2,\n{A}:15"
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:17'")
    run(conn, "SET AUTOCOMMIT = 0")
    run(conn, "INSERT INTO d.t1 VALUES (1)")
    assert error(conn, "CREATE TABLE d.t2 (a INT)") == IMPLICIT_COMMIT
    run(conn, "ROLLBACK")
    assert run(conn, "SELECT @@SESSION.GTID_NEXT") == ((f"{A}:17",),)
    run(conn, "SET @@SESSION.GTID_NEXT = 'AUTOMATIC'")
    run(conn, "SET AUTOCOMMIT = 1")
    assert run(conn, "SHOW TABLES FROM d") == (("t1",),)  # t2 never existed
    binlog = emu.server.binlog
    assert binlog is not None
    assert all(t.gtid is not None for t in binlog.transactions())
    conn.close()


def test_gtid_next_ownership_rules(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")  # U:1
    run(conn, "CREATE TABLE d.t (a INT)")  # U:2
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:13'")
    assert error(conn, f"SET @@SESSION.GTID_NEXT = '{A}:14'") == owns(f"{A}:13")
    run(conn, "SET @@SESSION.GTID_NEXT = 'AUTOMATIC'")  # the refused SET released A:13
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:13'")
    assert error(conn, "SET @@SESSION.GTID_NEXT = 'AUTOMATIC'") == owns(f"{A}:13")
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:20'")
    run(conn, "INSERT INTO d.t VALUES (1)")  # commits A:20
    assert error(conn, "INSERT INTO d.t VALUES (2)") == (
        1837,
        "When @@SESSION.GTID_NEXT is set to a GTID, you must explicitly set it to a different "
        "value after a COMMIT or ROLLBACK. Please check GTID_NEXT variable manual page for "
        f"detailed explanation. Current @@SESSION.GTID_NEXT is '{A}:20'.",
    )
    assert run(conn, "SELECT 1") == ((1,),)  # innocent statements still run
    run(conn, f"SET @@SESSION.GTID_NEXT = '{A}:20'")  # already executed: skipped
    run(conn, "INSERT INTO d.t VALUES (3)")
    run(conn, "SET @@SESSION.GTID_NEXT = 'AUTOMATIC'")
    assert run(conn, "SELECT a FROM d.t") == ((1,),)
    assert executed(conn) == f"{U}:1-2,\n{A}:20"
    conn.close()


def test_gtid_next_anonymous_ownership() -> None:
    """Under GTID_MODE=OFF: owning ANONYMOUS blocks changing GTID_NEXT; a commit releases it."""
    config = ServerConfig(server_uuid=U, gtid_mode=GtidMode.OFF, enforce_gtid_consistency=False)
    with EmulatorThread(config) as emu:
        conn = connect(emu)
        run(conn, "SET GTID_NEXT = 'ANONYMOUS'")
        assert run(conn, "SELECT @@SESSION.GTID_OWNED") == (("ANONYMOUS",),)
        assert error(conn, "SET GTID_NEXT = 'ANONYMOUS'") == owns("ANONYMOUS")
        run(conn, "SET GTID_NEXT = 'ANONYMOUS'")
        assert error(conn, f"SET GTID_NEXT = '{A}:1'") == owns("ANONYMOUS")
        assert error(conn, f"SET GTID_NEXT = '{A}:1'") == (
            1781,
            "@@SESSION.GTID_NEXT cannot be set to UUID:NUMBER when @@GLOBAL.GTID_MODE = OFF.",
        )
        run(conn, "SET GTID_NEXT = 'ANONYMOUS'")
        run(conn, "CREATE DATABASE d")  # commits; ANONYMOUS is released
        assert run(conn, "SELECT @@SESSION.GTID_OWNED") == (("",),)
        run(conn, "SET GTID_NEXT = 'AUTOMATIC'")
        conn.close()


# --- WAIT_FOR_EXECUTED_GTID_SET anywhere --------------------------------------------------------


def test_wait_for_executed_gtid_set_in_dml(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "CREATE TABLE d.t1 (a INT, b INT)")
    run(conn, f"INSERT INTO d.t1 VALUES (WAIT_FOR_EXECUTED_GTID_SET('{U}:1'), 1)")
    run(conn, f"INSERT INTO d.t1 SET a = WAIT_FOR_EXECUTED_GTID_SET('{U}:99', 0.05), b = 2")
    run(conn, f"UPDATE d.t1 SET b = b + 10 WHERE a = WAIT_FOR_EXECUTED_GTID_SET('{U}:2')")
    run(conn, "SET @w = WAIT_FOR_EXECUTED_GTID_SET('')")
    assert run(conn, "SELECT a, b FROM d.t1 ORDER BY b") == ((1, 2), (0, 11))
    assert run(conn, "SELECT @w") == ((0,),)
    run(conn, f"DELETE FROM d.t1 WHERE a = WAIT_FOR_EXECUTED_GTID_SET('{U}:1-3', 1) + 1")
    assert run(conn, "SELECT a, b FROM d.t1") == ((0, 11),)
    bad = f"INSERT INTO d.t1 VALUES (WAIT_FOR_EXECUTED_GTID_SET('{U}:x'), 3)"
    assert error(conn, bad) == (1772, f"Malformed GTID set specification '{U}:x'.")
    conn.close()


def test_wait_in_a_replicated_insert_is_null_on_the_replica() -> None:
    """The statement is logged as written; the replica's applier evaluates it to NULL."""
    from consistent.emulator.replication import TopologySpec
    from consistent.emulator.replication.testing import execute, run_virtual, virtual_topology

    async def scenario(clock: Any) -> None:
        async with await virtual_topology(TopologySpec.primary_with_replicas(1), clock) as topo:
            primary, replica = topo.server("primary"), topo.server("replica1")
            await execute(primary, "CREATE DATABASE d")
            await execute(primary, "CREATE TABLE d.t1 (a INT)")
            source = primary.config.server_uuid
            await execute(
                primary, f"INSERT INTO d.t1 VALUES (WAIT_FOR_EXECUTED_GTID_SET('{source}:1'))"
            )
            await clock.sleep(2)
            for server, value in ((primary, 0), (replica, None)):
                session = server.open_session()
                out = await session.query_all("SELECT a FROM d.t1")
                assert out[0].result is not None
                assert out[0].result.rows == ((value,),)
                await session.close()

    run_virtual(scenario)


def test_temporary_tables_stay_with_the_session_across_xa_prepare(emu: EmulatorThread) -> None:
    conn = connect(emu)
    run(conn, "CREATE DATABASE d")
    run(conn, "USE d")
    run(conn, "CREATE TABLE t (a INT)")
    run(conn, "CREATE TEMPORARY TABLE tmp (a INT)")
    run(conn, "INSERT INTO tmp VALUES (1), (2)")
    run(conn, "XA START 'k'")
    run(conn, "INSERT INTO t VALUES (3)")
    run(conn, "XA END 'k'")
    run(conn, "XA PREPARE 'k'")
    assert run(conn, "SELECT a FROM tmp ORDER BY a") == ((1,), (2,))
    run(conn, "INSERT INTO tmp VALUES (4)")  # the session writes again after the detach
    run(conn, "XA COMMIT 'k'")
    assert run(conn, "SELECT COUNT(*) FROM tmp") == ((3,),)
    assert run(conn, "SELECT a FROM t") == ((3,),)
    conn.close()


def test_wait_for_executed_gtid_set_with_column_arguments(emu: EmulatorThread) -> None:
    """Per row: 0 for an executed set, 1 when the timeout passes, 0 once another session
    commits the awaited GTID during the wait; NULL sets are 1772 as with constants."""
    import threading
    import time

    conn = connect(emu)
    run(conn, "CREATE DATABASE d")  # U:1
    run(conn, "CREATE TABLE d.w (id INT PRIMARY KEY, g VARCHAR(100), t DOUBLE)")  # U:2
    run(conn, f"INSERT INTO d.w VALUES (1, '{U}:1', 1), (2, '{U}:90', 0.05)")  # U:3
    assert run(conn, "SELECT id, WAIT_FOR_EXECUTED_GTID_SET(g, t) FROM d.w ORDER BY id") == (
        (1, 0),
        (2, 1),
    )
    run(conn, f"INSERT INTO d.w VALUES (3, '{U}:5', 30)")  # U:4; U:5 comes from another session
    other = connect(emu)

    def commit_later() -> None:
        time.sleep(0.3)
        run(other, "CREATE DATABASE e")  # U:5

    thread = threading.Thread(target=commit_later)
    thread.start()
    started = time.monotonic()
    run(conn, "UPDATE d.w SET t = WAIT_FOR_EXECUTED_GTID_SET(g, t) WHERE id = 3")
    thread.join(10)
    assert time.monotonic() - started < 25  # released by the commit, not by the timeout
    assert run(conn, "SELECT t FROM d.w WHERE id = 3") == ((0.0,),)
    run(conn, "INSERT INTO d.w VALUES (4, NULL, 1)")
    assert error(conn, "SELECT WAIT_FOR_EXECUTED_GTID_SET(g) FROM d.w WHERE id = 4") == (
        1772,
        "Malformed GTID set specification 'NULL'.",
    )
    other.close()
    conn.close()
