"""Transactions across sessions: visibility, isolation, lock waits, savepoints, temp tables."""

from __future__ import annotations

import asyncio

import pytest

from consistent.emulator import SqlError
from consistent.emulator.testing import U, one, q, rows, run, scalar, server
from consistent.protocol.constants import ServerStatus


async def _two_sessions(**config: object):  # type: ignore[no-untyped-def]
    srv = server(**config)
    a = srv.open_session()
    await q(a, "CREATE DATABASE d")
    await q(a, "CREATE TABLE d.t (id INT PRIMARY KEY, v VARCHAR(10))")
    await q(a, "USE d")
    b = srv.open_session("root", "d")
    return srv, a, b


def test_uncommitted_is_invisible_committed_is_visible_at_once() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        out = await one(a, "BEGIN")
        assert out.status & ServerStatus.IN_TRANS
        await q(a, "INSERT INTO t VALUES (1, 'x')")
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 0
        out = await one(a, "COMMIT")
        assert not out.status & ServerStatus.IN_TRANS
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 1
        await srv.shutdown()

    run(scenario())


def test_autocommit_writes_are_visible_immediately() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "INSERT INTO t VALUES (1, 'x')")
        assert await rows(b, "SELECT v FROM t") == [("x",)]
        await q(b, "UPDATE t SET v = 'y'")
        assert await rows(a, "SELECT v FROM t") == [("y",)]
        await srv.shutdown()

    run(scenario())


def test_repeatable_read_snapshot_inside_a_transaction() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "INSERT INTO t VALUES (1, 'x')")
        await q(b, "START TRANSACTION WITH CONSISTENT SNAPSHOT")
        await q(a, "INSERT INTO t VALUES (2, 'y')")
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 1
        await q(b, "COMMIT")
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 2
        await srv.shutdown()

    run(scenario())


def test_writer_waits_for_the_other_writer() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        blocked = asyncio.create_task(q(b, "INSERT INTO t VALUES (2, 'b')"))
        await asyncio.sleep(0.02)
        assert not blocked.done()
        await q(a, "COMMIT")
        await asyncio.wait_for(blocked, 1)
        assert await rows(a, "SELECT id FROM t ORDER BY id") == [(1,), (2,)]
        assert str(srv.gtid_state.executed) == f"{U}:1-4"
        await srv.shutdown()

    run(scenario())


def test_lock_wait_timeout_is_1205() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(b, "SET innodb_lock_wait_timeout = 1")
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        loop = asyncio.get_running_loop()
        started = loop.time()
        with pytest.raises(SqlError) as info:
            await q(b, "DELETE FROM t")
        assert info.value.args == (1205, "Lock wait timeout exceeded; try restarting transaction")
        assert loop.time() - started >= 0.9
        await q(a, "COMMIT")
        await srv.shutdown()

    run(scenario())


def test_read_after_write_in_other_session_then_write_sees_latest() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "SET autocommit = 0")
        await q(a, "SELECT * FROM t")  # snapshot taken
        await q(b, "INSERT INTO t VALUES (1, 'b')")
        with pytest.raises(SqlError) as info:
            await q(a, "INSERT INTO t VALUES (1, 'a')")  # writes see the committed row
        assert info.value.args[0] == 1062
        await q(a, "INSERT INTO t VALUES (2, 'a')")
        await q(a, "COMMIT")
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 2
        await srv.shutdown()

    run(scenario())


def test_autocommit_zero_starts_implicit_transactions() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        out = await one(a, "SET autocommit = 0")
        assert not out.status & ServerStatus.AUTOCOMMIT
        out = await one(a, "INSERT INTO t VALUES (1, 'x')")
        assert out.status & ServerStatus.IN_TRANS
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 0
        assert srv.gtid_state.executed.count() == 2
        await q(a, "SET autocommit = 1")  # commits
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 1
        assert srv.gtid_state.executed.count() == 3
        await srv.shutdown()

    run(scenario())


def test_savepoints() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        await q(a, "SAVEPOINT s1")
        await q(a, "INSERT INTO t VALUES (2, 'b')")
        await q(a, "SAVEPOINT s2")
        await q(a, "INSERT INTO t VALUES (3, 'c')")
        await q(a, "ROLLBACK TO SAVEPOINT s1")
        assert await rows(a, "SELECT id FROM t") == [(1,)]
        with pytest.raises(SqlError) as info:
            await q(a, "ROLLBACK TO s2")
        assert info.value.args == (1305, "SAVEPOINT s2 does not exist")
        await q(a, "RELEASE SAVEPOINT s1")
        await q(a, "COMMIT")
        assert await rows(b, "SELECT id FROM t") == [(1,)]
        binlog = srv.binlog
        assert binlog is not None
        assert [s.sql for s in list(binlog.transactions())[-1].statements] == [
            "INSERT INTO t VALUES (1, 'a')"
        ]
        await srv.shutdown()

    run(scenario())


def test_read_only_transaction_refuses_writes_1792() -> None:
    async def scenario() -> None:
        srv, a, _b = await _two_sessions()
        out = await one(a, "START TRANSACTION READ ONLY")
        assert out.status & ServerStatus.IN_TRANS_READONLY
        with pytest.raises(SqlError) as info:
            await q(a, "INSERT INTO t VALUES (1, 'x')")
        assert info.value.args == (1792, "Cannot execute statement in a READ ONLY transaction.")
        await q(a, "CREATE TEMPORARY TABLE tt (a INT)")
        await q(a, "INSERT INTO tt VALUES (1)")
        await q(a, "COMMIT")
        await srv.shutdown()

    run(scenario())


def test_statement_error_keeps_the_transaction() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        with pytest.raises(SqlError):
            await q(a, "INSERT INTO t VALUES (2, 'b'), (1, 'dup')")
        await q(a, "COMMIT")
        assert await rows(b, "SELECT id FROM t") == [(1,)]
        await srv.shutdown()

    run(scenario())


def test_close_rolls_back_and_releases_the_lock() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        await a.close()
        await asyncio.wait_for(q(b, "INSERT INTO t VALUES (2, 'b')"), 1)
        assert await rows(b, "SELECT id FROM t") == [(2,)]
        await srv.shutdown()

    run(scenario())


def test_temporary_tables_are_per_session_and_shadow() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "INSERT INTO t VALUES (1, 'base')")
        await q(a, "CREATE TEMPORARY TABLE t (id INT, v VARCHAR(10))")
        await q(a, "INSERT INTO t VALUES (7, 'temp')")
        assert await rows(a, "SELECT v FROM t") == [("temp",)]
        assert await rows(b, "SELECT v FROM t") == [("base",)]
        with pytest.raises(SqlError):
            await q(b, "CREATE TABLE x AS SELECT 1")
        executed = srv.gtid_state.executed
        await q(a, "CREATE TEMPORARY TABLE only_a (z INT)")
        await q(a, "INSERT INTO only_a VALUES (1)")
        assert srv.gtid_state.executed == executed  # no GTID for temporary tables
        with pytest.raises(SqlError) as info:
            await q(b, "SELECT * FROM only_a")
        assert info.value.args[0] == 1146
        await q(a, "DROP TEMPORARY TABLE t")
        assert await rows(a, "SELECT v FROM t") == [("base",)]
        await a.close()
        c = srv.open_session("root", "d")
        with pytest.raises(SqlError):
            await q(c, "SELECT * FROM only_a")
        await srv.shutdown()

    run(scenario())


def test_begin_commits_the_open_transaction() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "BEGIN")
        await q(a, "INSERT INTO t VALUES (1, 'a')")
        await q(a, "BEGIN")
        assert await scalar(b, "SELECT COUNT(*) FROM t") == 1
        await q(a, "ROLLBACK")
        await srv.shutdown()

    run(scenario())


def test_select_for_update_takes_the_writer_lock() -> None:
    async def scenario() -> None:
        srv, a, b = await _two_sessions()
        await q(a, "INSERT INTO t VALUES (1, 'x')")
        await q(a, "BEGIN")
        await q(a, "SELECT * FROM t WHERE id = 1 FOR UPDATE")
        blocked = asyncio.create_task(q(b, "UPDATE t SET v = 'b' WHERE id = 1"))
        await asyncio.sleep(0.02)
        assert not blocked.done()
        await q(a, "UPDATE t SET v = 'a' WHERE id = 1")
        await q(a, "COMMIT")
        await asyncio.wait_for(blocked, 1)
        assert await rows(a, "SELECT v FROM t") == [("b",)]
        await srv.shutdown()

    run(scenario())
