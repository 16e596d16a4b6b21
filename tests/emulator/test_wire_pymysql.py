"""PyMySQL against the emulator over TCP: queries, transactions, session tracking (every row of
reference §2.2), KILL QUERY of a waiting WAIT_FOR_EXECUTED_GTID_SET, and 50 sessions at once.

Session state is read the way reference §7 describes — the OK packet's raw tail kept by
PyMySQL, seen through the project's one PyMySQL adapter (``TrackingConnection``) — and decoded
with the project's codec (``parse_session_state``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pymysql
import pytest
from pymysql.constants import CLIENT

from consistent.dbapi._pymysql import TrackingConnection
from consistent.emulator.config import Account, ServerConfig
from consistent.emulator.wire import EmulatorThread
from consistent.protocol import Gtids, Reader, ServerStatus, parse_session_state

U = "00000000-1111-0000-1111-000000000000"  # mysqld's deterministic test UUID (reference §2.2)
U2 = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee"

ACCOUNTS = (Account("root", ""), Account("app", "secret"))


@pytest.fixture(scope="module")
def emu() -> Iterator[EmulatorThread]:
    with EmulatorThread(ServerConfig(server_uuid=U, accounts=ACCOUNTS)) as emulator:
        yield emulator


def connect(emu: EmulatorThread, **kw: Any) -> pymysql.connections.Connection:
    kw.setdefault("user", "root")
    return pymysql.connect(host="127.0.0.1", port=emu.port, connect_timeout=10, **kw)


def scalar(conn: pymysql.connections.Connection, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone()
    return None if row is None else row[0]


# --- plain use ------------------------------------------------------------------------------------


def test_queries_and_types(emu: EmulatorThread) -> None:
    conn = connect(emu, password="", autocommit=True)
    with conn.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS plain")
        cur.execute("USE plain")
        cur.execute("DROP TABLE IF EXISTS items")
        cur.execute(
            "CREATE TABLE items (id INT PRIMARY KEY AUTO_INCREMENT, name VARCHAR(40) NOT NULL,"
            " price DECIMAL(10,2), created DATETIME, note TEXT)"
        )
        assert (
            cur.execute(
                "INSERT INTO items (name, price, created, note)"
                " VALUES (%s, %s, %s, %s), (%s, %s, %s, %s)",
                (
                    "pen",
                    "1.50",
                    "2024-01-02 03:04:05",
                    None,
                    "ink",
                    "0.25",
                    "2024-02-03 04:05:06",
                    "x",
                ),
            )
            == 2
        )
        assert cur.lastrowid == 1
        cur.execute("SELECT id, name, price, created, note FROM items ORDER BY id")
        rows = cur.fetchall()
    import datetime
    import decimal

    assert rows == (
        (1, "pen", decimal.Decimal("1.50"), datetime.datetime(2024, 1, 2, 3, 4, 5), None),
        (2, "ink", decimal.Decimal("0.25"), datetime.datetime(2024, 2, 3, 4, 5, 6), "x"),
    )
    assert conn.get_server_info().startswith("8.0.")
    assert conn.thread_id() == scalar(conn, "SELECT CONNECTION_ID()")
    conn.ping()
    conn.select_db("plain")
    assert scalar(conn, "SELECT DATABASE()") == "plain"
    conn.close()


def test_password_account_and_errors(emu: EmulatorThread) -> None:
    conn = connect(emu, user="app", password="secret")
    assert scalar(conn, "SELECT CURRENT_USER()").startswith("app@")
    with pytest.raises(pymysql.err.ProgrammingError) as info:
        scalar(conn, "SELECT * FROM no_such_db.t")
    assert info.value.args[0] in (1049, 1146)
    assert scalar(conn, "SELECT 1") == 1  # the connection survives an error
    conn.close()
    with pytest.raises(pymysql.err.OperationalError) as denied:
        connect(emu, user="app", password="nope")
    assert denied.value.args == (
        1045,
        "Access denied for user 'app'@'localhost' (using password: YES)",
    )


def test_transactions(emu: EmulatorThread) -> None:
    a = connect(emu, autocommit=False)
    b = connect(emu, autocommit=True)
    with a.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS trx")
        cur.execute("DROP TABLE IF EXISTS trx.t")
        cur.execute("CREATE TABLE trx.t (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO trx.t VALUES (1)")
        assert a.server_status & ServerStatus.IN_TRANS
        a.rollback()
        cur.execute("INSERT INTO trx.t VALUES (2)")
        a.commit()
        assert not a.server_status & ServerStatus.IN_TRANS
    assert scalar(b, "SELECT GROUP_CONCAT(id) FROM trx.t") == "2"
    a.close()
    b.close()


def test_multi_statements_with_pymysql(emu: EmulatorThread) -> None:
    conn = connect(emu, client_flag=CLIENT.MULTI_STATEMENTS)
    with conn.cursor() as cur:
        cur.execute("SELECT 1; SELECT 2; SELECT 3")
        seen = [cur.fetchall()]
        while cur.nextset():
            seen.append(cur.fetchall())
    assert seen == [((1,),), ((2,),), ((3,),)]
    conn.close()


# --- KILL -----------------------------------------------------------------------------------------


def _wait_until(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_kill_query_interrupts_wait_for_executed_gtid_set(emu: EmulatorThread) -> None:
    waiter = connect(emu)
    killer = connect(emu)
    waiter_id = waiter.thread_id()
    outcome: dict[str, Any] = {}

    def wait() -> None:
        started = time.monotonic()
        try:
            outcome["value"] = scalar(waiter, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:100000')")
        except pymysql.err.MySQLError as e:
            outcome["error"] = e
        outcome["elapsed"] = time.monotonic() - started

    thread = threading.Thread(target=wait)
    thread.start()
    _wait_until(lambda: emu.wire.connections[waiter_id].busy)
    time.sleep(0.1)
    with killer.cursor() as cur:
        cur.execute(f"KILL QUERY {waiter_id}")
    thread.join(10)
    assert not thread.is_alive()
    error = outcome.get("error")
    assert error is not None, outcome
    assert error.args == (1317, "Query execution was interrupted")
    assert scalar(waiter, "SELECT 1") == 1  # KILL QUERY leaves the connection usable
    waiter.close()
    killer.close()


def test_kill_connection_of_a_busy_session(emu: EmulatorThread) -> None:
    waiter = connect(emu)
    killer = connect(emu)
    waiter_id = waiter.thread_id()
    errors: list[BaseException] = []

    def wait() -> None:
        try:
            scalar(waiter, f"SELECT WAIT_FOR_EXECUTED_GTID_SET('{U}:100000')")
        except pymysql.err.MySQLError as e:
            errors.append(e)

    thread = threading.Thread(target=wait)
    thread.start()
    _wait_until(lambda: emu.wire.connections[waiter_id].busy)
    with killer.cursor() as cur:
        cur.execute(f"KILL CONNECTION {waiter_id}")
    thread.join(10)
    assert not thread.is_alive()
    assert [e.args[0] for e in errors] in ([1927], [2013])
    _wait_until(lambda: waiter_id not in emu.wire.connections)
    with pytest.raises(pymysql.err.MySQLError):
        scalar(waiter, "SELECT 1")
    killer.close()


def test_kill_connection_from_pymysql(emu: EmulatorThread) -> None:
    victim = connect(emu)
    killer = connect(emu)
    killer.kill(victim.thread_id())  # COM_PROCESS_KILL
    with pytest.raises(pymysql.err.OperationalError) as info:
        scalar(victim, "SELECT 1")
    assert info.value.args[0] in (2013, 2006)
    assert scalar(killer, "SELECT 1") == 1
    killer.close()


# --- many sessions --------------------------------------------------------------------------------


def test_fifty_concurrent_sessions(emu: EmulatorThread) -> None:
    setup = connect(emu, autocommit=True)
    with setup.cursor() as cur:
        cur.execute("CREATE DATABASE IF NOT EXISTS conc")
        cur.execute("DROP TABLE IF EXISTS conc.hits")
        cur.execute("CREATE TABLE conc.hits (session INT, n INT, PRIMARY KEY (session, n))")
    barrier = threading.Barrier(50)
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            conn = connect(emu, autocommit=True)
            barrier.wait(10)
            with conn.cursor() as cur:
                for n in range(4):
                    cur.execute("INSERT INTO conc.hits VALUES (%s, %s)", (i, n))
                cur.execute("SELECT COUNT(*) FROM conc.hits WHERE session = %s", (i,))
                assert cur.fetchone() == (4,)
            conn.close()
        except BaseException as e:  # collected for the main thread
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors[:3]
    assert scalar(setup, "SELECT COUNT(*) FROM conc.hits") == 200
    setup.close()


# --- session tracking: reference §2.2 -------------------------------------------------------------


def gtid_text(*groups: tuple[str, int, int]) -> str:
    """mysqld's default format, written out by hand: sorted UUIDs, ``,\\n`` between them."""
    parts = []
    for uuid, start, end in sorted(groups):
        parts.append(f"{uuid}:{start}" if start == end else f"{uuid}:{start}-{end}")
    return ",\n".join(parts)


class Tracker:
    """Collects the GTIDS blocks of every OK packet a TrackingConnection sees."""

    def __init__(self) -> None:
        self.reports: list[str] = []
        self.statuses: list[int] = []

    def __call__(self, status: int, tail: bytes) -> None:
        self.statuses.append(status)
        reader = Reader(tail)
        reader.lenenc_bytes()  # info
        if reader.at_end():
            return
        for block in parse_session_state(reader.lenenc_view()):
            if isinstance(block, Gtids):
                self.reports.append(block.text)

    def take(self) -> list[str]:
        out, self.reports = self.reports, []
        return out


def tracking(emu: EmulatorThread, tracker: Tracker) -> TrackingConnection:
    return TrackingConnection(
        host="127.0.0.1",
        port=emu.port,
        user="root",
        autocommit=True,
        observer=tracker,
        client_flag=CLIENT.SESSION_TRACK,
    )


# (statement, GTIDs it commits on U, what OWN_GTID reports, whether ALL_GTIDS reports the set)
# The rows of reference §2.2, in one sequence; ``None`` = commit via conn.commit() (an OK read by
# _read_ok_packet rather than _read_query_result).
STEPS: list[tuple[str | None, int, bool, bool]] = [
    ("CREATE TABLE t1 (id INT PRIMARY KEY)", 1, True, True),  # DDL
    ("INSERT INTO t1 VALUES (1)", 1, True, True),  # autocommit DML
    ("BEGIN", 0, False, False),
    ("INSERT INTO t1 VALUES (2)", 0, False, False),  # DML inside an explicit trx
    ("COMMIT", 1, True, True),
    ("BEGIN", 0, False, False),
    ("INSERT INTO t1 VALUES (3)", 0, False, False),
    (None, 1, True, True),  # COMMIT through PyMySQL's commit()
    ("BEGIN", 0, False, False),
    ("INSERT INTO t1 VALUES (4)", 0, False, False),
    ("CREATE TABLE t2 (id INT)", 2, True, True),  # DDL in an open trx: implicit commit + DDL
    ("SELECT * FROM t1", 0, False, False),  # ALL would report, but a result set ends in EOF
    ("BEGIN", 0, False, False),
    ("INSERT INTO t1 VALUES (5)", 0, False, False),
    ("SAVEPOINT s1", 0, False, False),
    ("INSERT INTO t1 VALUES (6)", 0, False, False),
    ("ROLLBACK TO SAVEPOINT s1", 0, False, False),
    ("ROLLBACK", 0, False, False),
    ("DO 1", 0, False, True),  # a statement without GTID: ALL reports the whole set
]


@pytest.mark.parametrize("mode", ["OFF", "OWN_GTID", "ALL_GTIDS"])
def test_session_track_gtids_reference_table(mode: str) -> None:
    tracker = Tracker()
    with EmulatorThread(ServerConfig(server_uuid=U, accounts=ACCOUNTS)) as emu:
        conn = tracking(emu, tracker)
        with conn.cursor() as cur:
            cur.execute("CREATE DATABASE track")  # U:1
            cur.execute("USE track")
            cur.execute(f"SET SESSION session_track_gtids = {mode}")
            tracker.take()
            last = 1
            for sql, new, own_reports, all_reports in STEPS:
                if sql is None:
                    conn.commit()
                else:
                    cur.execute(sql)
                    cur.fetchall()
                first, last = last + 1, last + new
                expected = {
                    "OFF": [],
                    "OWN_GTID": [gtid_text((U, first, last))] if own_reports else [],
                    "ALL_GTIDS": [gtid_text((U, 1, last))] if all_reports else [],
                }[mode]
                assert tracker.take() == expected, sql

            # GTID_NEXT = uuid2:1 + DDL: OWN reports uuid2:1 in lower case; ALL the whole set.
            cur.execute(f"SET GTID_NEXT = '{U2.upper()}:1'")
            tracker.take()
            cur.execute("CREATE TABLE t3 (id INT)")
            expected_next = {
                "OFF": [],
                "OWN_GTID": [gtid_text((U2, 1, 1))],
                "ALL_GTIDS": [gtid_text((U, 1, last), (U2, 1, 1))],
            }[mode]
            assert tracker.take() == expected_next
            cur.execute("SET GTID_NEXT = 'AUTOMATIC'")
            tracker.take()

            # SET session_track_gtids: the mode in force before the statement governs.
            cur.execute("SET SESSION session_track_gtids = OFF")
            expected_set = [gtid_text((U, 1, last), (U2, 1, 1))] if mode == "ALL_GTIDS" else []
            assert tracker.take() == expected_set
            cur.execute("CREATE TABLE t4 (id INT)")
            assert tracker.take() == []
        conn.close()


def test_session_track_error_inside_transaction(emu: EmulatorThread) -> None:
    tracker = Tracker()
    conn = tracking(emu, tracker)
    with conn.cursor() as cur:
        cur.execute("BEGIN")
        with pytest.raises(pymysql.err.MySQLError) as info:
            cur.execute("SET SESSION session_track_gtids = OWN_GTID")
        assert info.value.args[0] == 1766
        cur.execute("ROLLBACK")
    conn.close()


def test_no_session_state_without_client_session_track(emu: EmulatorThread) -> None:
    conn = connect(emu, autocommit=True)
    with conn.cursor() as cur:
        cur.execute("SET SESSION session_track_gtids = ALL_GTIDS")
        cur.execute("CREATE DATABASE IF NOT EXISTS untracked")
        result = conn._result
        assert result is not None
        assert not result.server_status & ServerStatus.SESSION_STATE_CHANGED
        assert result.message in (b"", None)
    conn.close()
