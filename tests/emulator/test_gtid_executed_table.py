"""mysql.gtid_executed (WL#6559, reference §4): writes, compression, reset and recovery."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from consistent.emulator import gtid_table
from consistent.emulator.gtid_table import COMPRESSOR_THREAD_NAME, STAGE_SUSPENDING
from consistent.emulator.testing import U2, U, q, rows, run, scalar, server
from consistent.gtid import GtidSet

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "aaaaaaaa-71ca-11e1-9e33-c80aa9429562"


def _table(rows_in: list[tuple[str, int, int]]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    gtid_table.create_table(conn)
    conn.executemany(f"INSERT INTO {gtid_table.GTID_TABLE} VALUES (?, ?, ?)", rows_in)
    return conn


def test_manual_example_rows_37_to_43_become_one() -> None:
    """MySQL manual 19.1.3.1: single-GTID rows 37..43 compress to one 37-43 row."""
    conn = _table([(A, n, n) for n in range(37, 44)])
    assert gtid_table.compress(conn) == 1
    assert gtid_table.table_rows(conn) == [(A, 37, 43)]


def test_each_transaction_merges_only_the_first_run() -> None:
    conn = _table([(A, 1, 1), (A, 2, 2), (A, 4, 4), (A, 5, 5), (B, 1, 3), (B, 4, 4)])
    assert gtid_table.compress_first_consecutive_range(conn) is False
    assert gtid_table.table_rows(conn) == [(A, 1, 2), (A, 4, 4), (A, 5, 5), (B, 1, 3), (B, 4, 4)]
    assert gtid_table.compress_first_consecutive_range(conn) is False
    assert gtid_table.table_rows(conn) == [(A, 1, 2), (A, 4, 5), (B, 1, 3), (B, 4, 4)]
    assert gtid_table.compress_first_consecutive_range(conn) is True
    assert gtid_table.table_rows(conn) == [(A, 1, 2), (A, 4, 5), (B, 1, 4)]
    assert gtid_table.compress_first_consecutive_range(conn) is True


def test_overlaps_and_other_uuids_are_never_merged() -> None:
    conn = _table([(A, 1, 5), (A, 3, 9), (B, 10, 10)])
    assert gtid_table.compress(conn) == 1
    assert gtid_table.table_rows(conn) == [(A, 1, 5), (A, 3, 9), (B, 10, 10)]
    assert gtid_table.fetch_gtids(conn) == GtidSet.parse(f"{A}:1-9,{B}:10")


def test_compression_at_start_three_rows_become_one() -> None:
    """binlog_gtid_compress_at_server_start.result: SERVER_UUID:1-3 in 3 rows → 1 row."""

    async def scenario() -> None:
        srv = server(log_bin=False)
        s = srv.open_session()
        for name in ("a", "b", "c"):
            await q(s, f"CREATE DATABASE {name}")
        assert srv.gtid_table_rows() == [(U, 1, 1), (U, 2, 2), (U, 3, 3)]
        await srv.start()
        await srv.compressor.wait_idle()
        assert srv.gtid_table_rows() == [(U, 1, 3)]
        await srv.shutdown()

    run(scenario())


def test_binlog_off_writes_the_row_inside_the_transaction() -> None:
    async def scenario() -> None:
        srv = server(log_bin=False)
        s = srv.open_session()
        other = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE TABLE d.t (a INT)")
        await q(s, "BEGIN")
        await q(s, "INSERT INTO d.t VALUES (1)")
        assert await rows(other, "SELECT * FROM mysql.gtid_executed") == [(U, 1, 1), (U, 2, 2)]
        await q(s, "COMMIT")
        assert await rows(other, "SELECT * FROM mysql.gtid_executed") == [
            (U, 1, 1),
            (U, 2, 2),
            (U, 3, 3),
        ]
        assert await scalar(other, "SELECT @@GLOBAL.gtid_purged") == f"{U}:1-3"
        await srv.shutdown()

    run(scenario())


def test_binlog_on_writes_at_rotation_and_shutdown_before_8_0_17() -> None:
    async def scenario() -> None:
        srv = server(log_bin=True, version="8.0.16-consistent-emulator")
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE DATABASE e")
        assert srv.gtid_table_rows() == []
        await q(s, "FLUSH BINARY LOGS")
        assert gtid_table.GtidSet.parse(f"{U}:1-2") == GtidSet.from_intervals(
            {(u, None): [(a, b)] for u, a, b in srv.gtid_table_rows()}
        )
        binlog = srv.binlog
        assert binlog is not None
        assert [f.name for f in binlog.files] == ["binlog.000001", "binlog.000002"]
        await q(s, "CREATE DATABASE f")
        await srv.shutdown()
        assert gtid_table.fetch_gtids(sqlite3.connect(srv.data_path)) == GtidSet.parse(f"{U}:1-3")

    run(scenario())


def test_periodic_compression_follows_the_period() -> None:
    async def scenario() -> None:
        srv = server(log_bin=False, gtid_executed_compression_period=3)
        await srv.start()
        await srv.compressor.wait_idle()
        s = srv.open_session()
        for n in range(3):
            await q(s, f"CREATE DATABASE d{n}")
        await asyncio.sleep(0)
        await srv.compressor.wait_idle()
        assert len(srv.gtid_table_rows()) == 3  # pre-increment counts 0,1,2: no signal yet
        await q(s, "CREATE DATABASE d3")  # count == 3 == period: compress
        await srv.compressor.wait_idle()
        assert srv.gtid_table_rows() == [(U, 1, 4)]
        await srv.shutdown()

    run(scenario())


def test_compressor_shows_in_performance_schema_threads() -> None:
    async def scenario() -> None:
        srv = server()
        s = srv.open_session()
        sql = (
            "SELECT NAME, TYPE, PROCESSLIST_STATE FROM performance_schema.threads "
            "WHERE NAME LIKE '%compress_gtid_table'"
        )
        assert await rows(s, sql) == []
        await srv.start()
        await srv.compressor.wait_idle()
        assert await rows(s, sql) == [(COMPRESSOR_THREAD_NAME, "BACKGROUND", STAGE_SUSPENDING)]
        await srv.shutdown()

    run(scenario())


def test_select_star_from_gtid_executed_metadata() -> None:
    async def scenario() -> None:
        srv = server(log_bin=False)
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        out = (await q(s, "SELECT * FROM mysql.gtid_executed"))[0]
        assert out.result is not None
        assert [c.name for c in out.result.columns] == [
            "source_uuid",
            "interval_start",
            "interval_end",
        ]
        assert out.result.rows == ((U, 1, 1),)
        create = await rows(s, "SHOW CREATE TABLE mysql.gtid_executed")
        assert "PRIMARY KEY (`source_uuid`,`interval_start`)" in str(create[0][1])
        await srv.shutdown()

    run(scenario())


def test_reset_master_empties_the_table() -> None:
    async def scenario() -> None:
        srv = server(log_bin=False)
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "RESET MASTER")
        assert srv.gtid_table_rows() == []
        assert srv.gtid_state.executed.is_empty()
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("clean", [True, False])
def test_restart_rebuilds_gtid_executed_binlog_on(clean: bool) -> None:
    async def scenario() -> None:
        srv = server(log_bin=True)
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "FLUSH BINARY LOGS")  # U:1 now in the table
        await q(s, "CREATE DATABASE e")  # U:2 only in the binary log
        await q(s, f"SET GLOBAL gtid_purged = '+{U2}:1-4'")
        if clean:
            await srv.shutdown()
        srv.restart()
        assert str(srv.gtid_state.executed) == f"{U}:1-2,\n{U2}:1-4"
        assert str(srv.gtid_state.purged) == f"{U2}:1-4"
        s = srv.open_session()
        await q(s, "CREATE DATABASE f")
        assert str(srv.gtid_state.executed) == f"{U}:1-3,\n{U2}:1-4"
        assert (
            await scalar(
                s,
                "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE "
                "SCHEMA_NAME IN ('d', 'e', 'f')",
            )
            == 3
        )
        await srv.shutdown()

    run(scenario())


def test_restart_binlog_off_uses_the_table_only() -> None:
    async def scenario() -> None:
        srv = server(log_bin=False)
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE TABLE d.t (a INT)")
        await q(s, "BEGIN")
        await q(s, "INSERT INTO d.t VALUES (1)")
        srv.restart()  # crash with an open transaction: it never happened
        assert str(srv.gtid_state.executed) == f"{U}:1-2"
        s = srv.open_session()
        assert await scalar(s, "SELECT COUNT(*) FROM d.t") == 0
        await srv.shutdown()

    run(scenario())


@pytest.mark.parametrize("version", ["8.0.16-consistent-emulator", "8.0.36-consistent-emulator"])
def test_start_writes_binlog_gtids_missing_from_the_table(version: str) -> None:
    """After a crash that saved nothing (before 8.0.17 rows come at rotation and shutdown),
    the start writes the binary log's GTIDs into the table; from 8.0.17 commits wrote them."""

    async def scenario() -> None:
        srv = server(log_bin=True, version=version)
        s = srv.open_session()
        await q(s, "CREATE DATABASE d")
        await q(s, "CREATE DATABASE e")
        before = srv.gtid_table_rows()
        assert before == ([] if version.startswith("8.0.16") else [(U, 1, 1), (U, 2, 2)])
        srv.restart()  # a crash: no shutdown, nothing saved
        assert str(srv.gtid_state.executed) == f"{U}:1-2"
        s = srv.open_session()
        table = await rows(s, "SELECT * FROM mysql.gtid_executed")
        assert sorted(table) == [(U, 1, 1), (U, 2, 2)] or table == [(U, 1, 2)]
        assert GtidSet.from_intervals(
            {(U, None): [(int(str(a)), int(str(b))) for _, a, b in table]}
        ) == GtidSet.parse(f"{U}:1-2")
        await srv.start()
        await srv.compressor.wait_idle()
        assert await rows(s, "SELECT * FROM mysql.gtid_executed") == [(U, 1, 2)]
        await srv.shutdown()

    run(scenario())
